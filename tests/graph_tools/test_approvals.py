"""Pending write approvals (graph_tools.services: approval_request / approval_decide / approvals_expire),
the API the chat side pauses a turn on, and who may decide them."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.graph_tools.embeddings import get_embedder, pending_batch_embed
from apps.graph_tools.errors import ApprovalNotFound, ApprovalNotPending, EntityNotFound
from apps.graph_tools.models import ApprovalStatus, GraphChange, GraphObject, WriteApproval
from apps.graph_tools.selectors import approval_allowed, approvals_pending
from apps.graph_tools.services import approval_decide, approval_request, approvals_expire
from apps.graph_tools.versions import graph_version_current
from apps.projects.selectors import Principal, RoleTooLow
from tests.factories import add_member, make_project, make_user
from tests.graph_tools.conftest import SmallGraph
from tests.graph_tools.vectors import vector_models

RUN, CONVERSATION = uuid.uuid4(), uuid.uuid4()


@pytest.fixture
def team(graph: SmallGraph) -> dict[str, Principal]:
    people = {}
    for role in ("owner", "editor", "viewer"):
        user = make_user()
        add_member(graph.project, user, role)
        people[role] = Principal(user=user)
    people["outsider"] = Principal(user=make_user())
    return people


def request_rename(graph: SmallGraph, team: dict[str, Principal], **extra: object) -> WriteApproval:
    return approval_request(
        project_id=graph.project.id,
        tool_name="update_entity",
        arguments={"entity_id": "alice", "name": "Alice Berlin"},
        requested_by_id=team["viewer"].user_id,
        run_id=RUN,
        conversation_id=CONVERSATION,
        call_id="call-1",
        **extra,  # type: ignore[arg-type]
    )


def test_request_stores_a_pending_approval_with_its_diff_and_writes_nothing(graph: SmallGraph, team):
    approval = request_rename(graph, team)

    assert approval.status == ApprovalStatus.PENDING
    assert approval.diff["changes"] == [{"field": "name", "before": "Alice Smith", "after": "Alice Berlin"}]
    assert (approval.run_id, approval.conversation_id, approval.call_id) == (RUN, CONVERSATION, "call-1")
    assert approval.expires_at > timezone.now()
    assert approvals_pending(conversation_id=CONVERSATION) == [approval]
    assert GraphObject.objects.get(id=graph.e["alice"].id).name == "Alice Smith"
    assert graph_version_current(project_id=graph.project.id) == 0


def test_request_of_a_call_that_cannot_run_stores_nothing(graph: SmallGraph, team):
    with pytest.raises(EntityNotFound):
        approval_request(
            project_id=graph.project.id,
            tool_name="delete_entity",
            arguments={"entity_id": "nobody"},
            requested_by_id=team["viewer"].user_id,
        )

    assert not WriteApproval.objects.exists()


def test_editor_approves_the_write_is_applied_and_audited_with_approver_approval_and_run(
    graph: SmallGraph, team
):
    approval = request_rename(graph, team)

    decided = approval_decide(principal=team["editor"], approval_id=approval.id, approve=True)

    assert decided.status == ApprovalStatus.APPROVED
    assert decided.decided_by_id == team["editor"].user_id and decided.decided_at is not None
    assert decided.result["changed"] is True and decided.result["graph_version"] == 1
    assert GraphObject.objects.get(id=graph.e["alice"].id).name == "Alice Berlin"
    change = GraphChange.objects.get()
    assert (change.user_id, change.authority, change.approval_id, change.run_id) == (
        team["editor"].user_id,
        "approval",
        approval.id,
        RUN,
    )


def test_reject_writes_nothing_and_the_result_tells_the_model_with_the_reason(graph: SmallGraph, team):
    approval = request_rename(graph, team)

    decided = approval_decide(
        principal=team["owner"], approval_id=approval.id, approve=False, reason="wrong Alice"
    )

    assert decided.status == ApprovalStatus.REJECTED
    assert decided.reason == "wrong Alice"
    assert decided.result == {
        "error": "the user declined this change; nothing was written (reason: wrong Alice)",
        "code": "approval_rejected",
    }
    assert GraphObject.objects.get(id=graph.e["alice"].id).name == "Alice Smith"
    assert graph_version_current(project_id=graph.project.id) == 0


def test_viewer_cannot_approve_and_the_approval_stays_pending(graph: SmallGraph, team):
    approval = request_rename(graph, team)

    with pytest.raises(RoleTooLow):
        approval_decide(principal=team["viewer"], approval_id=approval.id, approve=True)

    assert not approval_allowed(principal=team["viewer"], project_id=graph.project.id)
    assert WriteApproval.objects.get(id=approval.id).status == ApprovalStatus.PENDING
    assert GraphObject.objects.get(id=graph.e["alice"].id).name == "Alice Smith"


def test_an_approval_of_another_project_is_not_found(graph: SmallGraph, team):
    approval = request_rename(graph, team)
    stranger = make_user()
    make_project(owner=stranger)

    with pytest.raises(ApprovalNotFound):
        approval_decide(principal=Principal(user=stranger), approval_id=approval.id, approve=True)
    with pytest.raises(ApprovalNotFound):
        approval_decide(principal=team["owner"], approval_id="not-an-id", approve=True)


def test_a_second_decision_is_refused_and_changes_nothing(graph: SmallGraph, team):
    approval = request_rename(graph, team)
    approval_decide(principal=team["editor"], approval_id=approval.id, approve=True)

    with pytest.raises(ApprovalNotPending, match="already approved"):
        approval_decide(principal=team["owner"], approval_id=approval.id, approve=False)

    assert WriteApproval.objects.get(id=approval.id).decided_by_id == team["editor"].user_id
    assert graph_version_current(project_id=graph.project.id) == 1


def test_a_decision_after_expiry_is_refused_marks_it_expired_and_writes_nothing(graph: SmallGraph, team):
    approval = request_rename(graph, team)
    later = approval.expires_at + timedelta(seconds=1)

    with pytest.raises(ApprovalNotPending, match="expired"):
        approval_decide(principal=team["editor"], approval_id=approval.id, approve=True, now=later)

    assert WriteApproval.objects.get(id=approval.id).status == ApprovalStatus.EXPIRED
    assert GraphObject.objects.get(id=graph.e["alice"].id).name == "Alice Smith"


def test_expire_marks_only_pending_approvals_past_their_time(graph: SmallGraph, team):
    old = request_rename(graph, team, now=timezone.now() - timedelta(days=1))
    fresh = request_rename(graph, team)

    count = approvals_expire()

    assert count == 1
    assert WriteApproval.objects.get(id=old.id).status == ApprovalStatus.EXPIRED
    assert WriteApproval.objects.get(id=fresh.id).status == ApprovalStatus.PENDING


def test_approving_a_write_the_graph_outgrew_records_the_error_and_writes_nothing(graph: SmallGraph, team):
    approval = approval_request(
        project_id=graph.project.id,
        tool_name="create_relationship",
        arguments={"src": "eve", "type": "KNOWS", "dst": "dave"},
        requested_by_id=team["viewer"].user_id,
    )
    GraphObject.objects.filter(id=graph.e["dave"].id).delete()

    decided = approval_decide(principal=team["editor"], approval_id=approval.id, approve=True)

    assert decided.status == ApprovalStatus.APPROVED
    assert decided.result["code"] == "entity_not_found"
    assert graph_version_current(project_id=graph.project.id) == 0
    assert not GraphChange.objects.exists()


def test_an_approved_create_entity_waits_for_the_worker_then_is_embedded(graph: SmallGraph, team):
    approval = approval_request(
        project_id=graph.project.id,
        tool_name="create_entity",
        arguments={"key": "hana", "type": "Person", "name": "Hana", "description": "Glassblower in Berlin."},
        requested_by_id=team["viewer"].user_id,
    )

    approval_decide(principal=team["owner"], approval_id=approval.id, approve=True)
    waiting = vector_models(graph.project, "hana")
    embedded = pending_batch_embed(project_id=graph.project.id)

    assert waiting == []
    assert embedded == 1
    assert vector_models(graph.project, "hana") == [get_embedder().name]

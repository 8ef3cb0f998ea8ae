"""Curation change sets (#51) over REST: each write proposed, reviewed by another editor or owner
through the one decision route and applied with one graph version and its changes recorded; who may
propose and approve; bad input; an apply that can no longer run writes nothing; undo; the list."""

from __future__ import annotations

import pytest

from apps.documents.models import ChangeSet
from apps.graph_tools.models import GraphChange, GraphObject, GraphRelationship
from apps.graph_tools.versions import graph_version_current
from tests.curation.conftest import Curators

pytestmark = pytest.mark.django_db


def version(c: Curators) -> int:
    return graph_version_current(project_id=c.project.id)


def test_update_entity_proposed_then_approved_by_another_editor_is_written_with_one_graph_version(
    curators: Curators,
):
    c = curators
    changes = [
        {
            "action": "update_entity",
            "args": {"entity_id": "ada", "name": "Ada King", "properties": {"born": 1815}},
        }
    ]

    proposed = c.propose(c.owner, changes, summary="Her married name")
    before = version(c)
    decided = c.decide(c.editor, proposed.json()["id"])

    assert proposed.status_code == 201, proposed.json()
    body = proposed.json()
    assert (body["kind"], body["status"], body["summary"], body["undoes"]) == (
        "curation",
        "review",
        "Her married name",
        None,
    )
    assert body["documentId"] is None and body["items"][0]["action"] == "update_entity"
    assert "Update entity" in body["items"][0]["evidence"]["plan"]["summary"]
    assert decided.status_code == 200, decided.json()
    assert decided.json()["status"] == "applied" and decided.json()["items"][0]["status"] == "applied"
    assert version(c) == before + 1 == decided.json()["graphVersion"]
    ada = GraphObject.objects.get(id=c.e["ada"].id)
    assert ada.name == "Ada King" and ada.properties == {"born": 1815}
    change = GraphChange.objects.get(project=c.project, version=version(c))
    assert (change.action, change.authority, change.entity_id) == ("update_entity", "curation", ada.id)


def test_delete_entity_proposed_and_approved_removes_it_with_its_relationships(curators: Curators):
    c = curators

    proposed = c.propose(c.editor, [{"action": "delete_entity", "args": {"entity_id": "engine"}}])
    decided = c.decide(c.owner, proposed.json()["id"])

    assert decided.status_code == 200, decided.json()
    assert not GraphObject.objects.filter(id=c.e["engine"].id).exists()
    assert not GraphRelationship.objects.filter(src=c.e["engine"].id).exists()
    actions = sorted(GraphChange.objects.filter(project=c.project).values_list("action", flat=True))
    assert actions == ["delete_entity", "delete_relationship"]


def test_create_and_delete_relationship_proposed_and_approved_are_written(curators: Curators):
    c = curators

    created = c.propose(
        c.editor,
        [{"action": "create_relationship", "args": {"src": "ada", "type": "LIVES_IN", "dst": "london"}}],
    )
    c.decide(c.owner, created.json()["id"])
    deleted = c.propose(
        c.editor,
        [{"action": "delete_relationship", "args": {"src": "ada", "type": "KNOWS", "dst": "babbage"}}],
    )
    decided = c.decide(c.owner, deleted.json()["id"])

    assert created.status_code == deleted.status_code == 201
    assert decided.json()["status"] == "applied"
    assert GraphRelationship.objects.filter(src=c.e["ada"], type="LIVES_IN", dst=c.e["london"]).exists()
    assert not GraphRelationship.objects.filter(src=c.e["ada"], type="KNOWS").exists()
    assert version(c) == 2


def test_a_member_cannot_approve_their_own_change_set_unless_the_project_allows(curators: Curators):
    c = curators
    proposed = c.propose(c.editor, [{"action": "delete_entity", "args": {"entity_id": "engine"}}]).json()

    own = c.decide(c.editor, proposed["id"])
    refused_setting = c.editor.put(
        f"/api/projects/{c.project.id}/curation/settings",
        {"authorsApproveOwn": True},
        content_type="application/json",
    )
    allowed = c.owner.put(
        f"/api/projects/{c.project.id}/curation/settings",
        {"authorsApproveOwn": True},
        content_type="application/json",
    )
    own_again = c.decide(c.editor, proposed["id"])

    assert own.status_code == 403 and own.json()["code"] == "own_change_set"
    assert refused_setting.status_code == 403
    assert allowed.json() == {"authorsApproveOwn": True}
    assert own_again.status_code == 200 and own_again.json()["status"] == "applied"
    assert not GraphObject.objects.filter(id=c.e["engine"].id).exists()


@pytest.mark.parametrize("body", [{"authorsApproveOwn": "yes"}, {"authorsApproveOwn": 1}, {"bogus": 1}])
def test_the_curation_setting_refuses_a_value_that_is_not_a_boolean_or_an_unknown_key(
    curators: Curators, body
):
    c = curators

    response = c.owner.put(
        f"/api/projects/{c.project.id}/curation/settings", body, content_type="application/json"
    )

    assert response.status_code == 400 and response.json()["code"] == "invalid_request"
    assert c.owner.get(f"/api/projects/{c.project.id}/curation/settings").json() == {
        "authorsApproveOwn": False
    }


def test_an_author_may_reject_their_own_change_set_and_nothing_is_written(curators: Curators):
    c = curators
    proposed = c.propose(c.editor, [{"action": "delete_entity", "args": {"entity_id": "engine"}}]).json()

    rejected = c.decide(c.editor, proposed["id"], approve=[], reject=[proposed["items"][0]["id"]])

    assert rejected.status_code == 200 and rejected.json()["status"] == "applied"
    assert rejected.json()["items"][0]["status"] == "rejected"
    assert GraphObject.objects.filter(id=c.e["engine"].id).exists() and version(c) == 0


def test_a_viewer_cannot_propose_a_change_set(curators: Curators):
    c = curators

    refused = c.propose(c.viewer, [{"action": "delete_entity", "args": {"entity_id": "engine"}}])

    assert refused.status_code == 403
    assert not ChangeSet.objects.filter(project=c.project).exists()


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ([], "invalid_request"),
        ("delete everything", "invalid_request"),
        ([{"action": "drop_table", "args": {}}], "unknown_action"),
        ([{"action": "delete_entity", "args": {"entity_id": "ada", "force": True}}], "invalid_arguments"),
        ([{"action": "delete_entity", "args": {"entity_id": "nobody"}}], "entity_not_found"),
        (
            [{"action": "update_entity", "args": {"entity_id": "ada", "name": "Ada Lovelace"}}],
            "nothing_to_change",
        ),
        (
            [{"action": "create_relationship", "args": {"src": "ada", "type": "KNOWS", "dst": "babbage"}}],
            "relationship_exists",
        ),
        ([{"action": "merge_entities", "args": {"keep": "ada", "merge": "ada"}}], "invalid_arguments"),
        ([{"action": "delete_entity", "args": {"entity_id": "a\u0000b"}}], "invalid_request"),
    ],
)
def test_bad_input_is_a_400_with_a_reason_and_stores_nothing(curators: Curators, changes, code):
    c = curators

    refused = c.propose(c.editor, changes)

    assert refused.status_code == 400, refused.content
    assert refused.json()["code"] == code and refused.json()["error"]
    assert not ChangeSet.objects.filter(project=c.project).exists()
    assert version(c) == 0


def test_a_change_set_the_graph_moved_past_writes_nothing_and_stays_in_review(curators: Curators):
    c = curators
    proposed = c.propose(
        c.editor,
        [
            {"action": "update_entity", "args": {"entity_id": "london", "description": "A city."}},
            {"action": "delete_relationship", "args": {"src": "ada", "type": "KNOWS", "dst": "babbage"}},
        ],
    ).json()
    GraphRelationship.objects.filter(src=c.e["ada"], type="KNOWS").delete()

    failed = c.decide(c.owner, proposed["id"])

    assert failed.status_code == 409 and failed.json()["code"] == "change_set_apply_failed"
    assert "delete_relationship" in failed.json()["error"]
    assert GraphObject.objects.get(id=c.e["london"].id).description == ""
    assert version(c) == 0 and not GraphChange.objects.filter(project=c.project).exists()
    assert ChangeSet.objects.get(id=proposed["id"]).status == "review"


def test_undo_of_an_update_proposes_the_old_values_and_restores_them_once_approved(curators: Curators):
    c = curators
    applied = c.propose(
        c.editor,
        [
            {
                "action": "update_entity",
                "args": {"entity_id": "ada2", "name": "Ada", "properties": {"born": None}},
            }
        ],
    ).json()
    c.decide(c.owner, applied["id"])

    undo = c.editor.post(f"/api/change-sets/{applied['id']}/undo")
    decided = c.decide(c.owner, undo.json()["id"])

    assert undo.status_code == 201, undo.json()
    assert undo.json()["undoes"] == applied["id"] and undo.json()["summary"].startswith("Undo")
    assert undo.json()["items"][0]["values"] == {
        "entity_id": str(c.e["ada2"].id),
        "name": "A. Lovelace",
        "properties": {"born": 1815},
    }
    assert decided.json()["status"] == "applied"
    ada2 = GraphObject.objects.get(id=c.e["ada2"].id)
    assert ada2.name == "A. Lovelace" and ada2.properties["born"] == 1815


def test_undo_of_a_delete_restores_the_entity_and_its_relationships(curators: Curators):
    c = curators
    applied = c.propose(c.editor, [{"action": "delete_entity", "args": {"entity_id": "ada2"}}]).json()
    c.decide(c.owner, applied["id"])

    undo = c.editor.post(f"/api/change-sets/{applied['id']}/undo").json()
    c.decide(c.owner, undo["id"])

    restored = GraphObject.objects.get(project=c.project, key="ada2")
    assert restored.name == "A. Lovelace" and restored.properties["aliases"] == ["Augusta Ada King"]
    edges = {
        (r.src.key, r.type, r.dst.key)
        for r in GraphRelationship.objects.filter(project=c.project).select_related("src", "dst")
    }
    assert {
        ("ada2", "KNOWS", "babbage"),
        ("ada2", "LIVES_IN", "london"),
        ("ada2", "SAME_AS", "ada"),
        ("engine", "DESIGNED_BY", "ada2"),
    } <= edges


def test_undo_of_a_change_set_not_applied_is_a_409(curators: Curators):
    c = curators
    pending = c.propose(c.editor, [{"action": "delete_entity", "args": {"entity_id": "engine"}}]).json()

    refused = c.editor.post(f"/api/change-sets/{pending['id']}/undo")

    assert refused.status_code == 409 and refused.json()["code"] == "nothing_to_undo"


def test_a_change_set_undone_already_or_whose_undo_waits_is_not_undone_twice(curators: Curators):
    c = curators
    update = [{"action": "update_entity", "args": {"entity_id": "ada2", "name": "Ada"}}]
    applied = c.propose(c.editor, update).json()
    c.decide(c.owner, applied["id"])

    first = c.editor.post(f"/api/change-sets/{applied['id']}/undo").json()
    while_waiting = c.owner.post(f"/api/change-sets/{applied['id']}/undo")
    c.decide(c.owner, first["id"])
    once_undone = c.owner.post(f"/api/change-sets/{applied['id']}/undo")
    redo = c.editor.post(f"/api/change-sets/{first['id']}/undo").json()
    c.decide(c.owner, redo["id"])
    after_redo = c.owner.post(f"/api/change-sets/{applied['id']}/undo")

    for refused in (while_waiting, once_undone):
        assert refused.status_code == 409 and refused.json()["code"] == "nothing_to_undo"
        assert first["id"] in refused.json()["error"]
    # Its undo undone in turn, the change stands again and may be undone again.
    assert after_redo.status_code == 201, after_redo.json()


def test_change_sets_are_listed_by_kind_and_status_paged(curators: Curators):
    c = curators
    first = c.propose(c.editor, [{"action": "delete_entity", "args": {"entity_id": "engine"}}]).json()
    c.propose(c.editor, [{"action": "delete_entity", "args": {"entity_id": "london"}}])
    c.decide(c.owner, first["id"])
    url = f"/api/projects/{c.project.id}/change-sets"

    in_review = c.viewer.get(url, {"kind": "curation", "status": "review"}).json()
    page = c.viewer.get(url, {"limit": 1}).json()
    extraction = c.viewer.get(url, {"kind": "extraction"}).json()
    bad = c.viewer.get(url, {"kind": "nonsense"})

    assert in_review["count"] == 1 and in_review["items"][0]["items"][0]["values"] == {"entity_id": "london"}
    assert page["count"] == 2 and len(page["items"]) == 1
    assert extraction == {"items": [], "count": 0}
    assert bad.status_code == 400


def test_a_type_edit_is_written_counted_and_undone(curators: Curators):
    from apps.graph_tools.models import EntityTypeCount

    c = curators
    applied = c.propose(
        c.editor, [{"action": "update_entity", "args": {"entity_id": "engine", "type": "Computer"}}]
    ).json()
    c.decide(c.owner, applied["id"])
    counted = set(EntityTypeCount.objects.filter(project_id=c.project.id).values_list("type", flat=True))

    undo = c.editor.post(f"/api/change-sets/{applied['id']}/undo").json()
    c.decide(c.owner, undo["id"])

    assert "Computer" in counted and "Machine" not in counted
    assert undo["items"][0]["values"] == {"entity_id": str(c.e["engine"].id), "type": "Machine"}
    assert GraphObject.objects.get(id=c.e["engine"].id).type == "Machine"


def test_undo_of_an_item_that_did_not_record_its_values_is_a_409_not_a_crash(curators: Curators):
    c = curators
    applied = c.propose(
        c.editor, [{"action": "update_entity", "args": {"entity_id": "ada", "name": "Ada"}}]
    ).json()
    c.decide(c.owner, applied["id"])
    ChangeSet.objects.get(id=applied["id"]).items.update(result={"changed": True})

    refused = c.editor.post(f"/api/change-sets/{applied['id']}/undo")

    assert refused.status_code == 409 and refused.json()["code"] == "nothing_to_undo"

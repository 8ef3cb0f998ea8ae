"""Admission in few round trips (issue #16 item 3): a new conversation's rows go in one statement
after one read, a follow-up's in a transaction of four statements. What the fewer statements must
not change: the rate limit (new conversations and follow-ups), the graph version a turn reads and
stores, the claim, the approvals a conversation waits on, and nothing half-written on a refusal."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.agents.llm.scripted import text
from apps.agents.models import AgentRun
from apps.chat.models import Conversation, Message
from apps.chat.turns import admission, claim
from apps.documents.services import document_upload
from apps.graph_tools.versions import graph_version_bump
from apps.projects.selectors import principal_from_user
from tests.chat.conftest import adb, agent_request, sse_turn, types

pytestmark = pytest.mark.django_db(transaction=True)


def _admit(world, **request):
    return admission.turn_admit(
        principal=principal_from_user(world["user"]),
        message=request.get("message", "Where is Paris?"),
        project_id=request.get("project_id"),
        conversation_id=request.get("conversation_id"),
        agent_definition_id=request.get("agent_definition_id"),
    )


def _bump(project, times: int) -> None:
    from django.db import transaction

    for _ in range(times):
        with transaction.atomic():
            graph_version_bump(project_id=project.id)


async def test_a_follow_up_over_the_rate_limit_gets_429_and_leaves_its_conversation_unclaimed(
    world, agent, scripted, settings
):
    settings.KGCHAT_TURNS_PER_MINUTE = 2
    scripted.turns += [text("a"), text("b"), text("c")]
    status, frames = await sse_turn(world["client"], agent_request(world, agent))
    conversation_id = next(f["conversationId"] for f in frames if f["type"] == "meta")
    await sse_turn(world["client"], {"message": "again", "conversationId": conversation_id})
    runs_before = await AgentRun.objects.acount()

    status, body = await sse_turn(
        world["client"], {"message": "once more", "conversationId": conversation_id}
    )

    assert status == 429 and body["code"] == "rate_limited"
    assert await Message.objects.filter(role="user").acount() == 2
    assert await AgentRun.objects.acount() == runs_before
    conversation = await Conversation.objects.aget(id=conversation_id)
    assert conversation.active_turn_id is None


def test_a_new_conversation_is_admitted_in_two_statements_with_every_row_and_the_graph_version(world, agent):
    _bump(world["project"], 3)

    with CaptureQueriesContext(connection) as queries:
        turn, expired = _admit(world, project_id=str(world["project"].id), agent_definition_id=str(agent.id))

    assert len(queries.captured_queries) == 2
    assert expired == [] and turn.graph_version == 3
    run = AgentRun.objects.get(id=turn.run_id)
    assert run.graph_version == 3 and run.conversation_id == turn.conversation.id
    conversation = Conversation.objects.get(id=turn.conversation.id)
    assert conversation.active_turn_id == turn.turn_id
    assert list(conversation.messages.values_list("role", "content")) == [("user", "Where is Paris?")]


def test_a_follow_up_is_claimed_and_admitted_in_four_statements_with_its_history(world, agent):
    first, _ = _admit(world, project_id=str(world["project"].id), agent_definition_id=str(agent.id))
    claim.claim_release(first.conversation.id, first.turn_id)
    _bump(world["project"], 2)

    with CaptureQueriesContext(connection) as queries:
        turn, _ = _admit(world, message="And France?", conversation_id=str(first.conversation.id))

    statements = [q["sql"] for q in queries.captured_queries if q["sql"] not in {"BEGIN", "COMMIT"}]
    assert len(statements) == 4
    assert turn.graph_version == 2 and AgentRun.objects.get(id=turn.run_id).graph_version == 2
    assert [m.content for m in turn.history] == ["Where is Paris?"]
    assert Conversation.objects.get(id=turn.conversation.id).active_turn_id == turn.turn_id


def test_a_follow_up_while_a_turn_runs_is_refused_and_writes_nothing(world, agent):
    first, _ = _admit(world, project_id=str(world["project"].id), agent_definition_id=str(agent.id))

    with pytest.raises(claim.TurnInProgress):
        _admit(world, message="And France?", conversation_id=str(first.conversation.id))

    assert Message.objects.filter(conversation_id=first.conversation.id).count() == 1
    assert AgentRun.objects.count() == 1
    assert Conversation.objects.get(id=first.conversation.id).active_turn_id == first.turn_id


async def test_a_new_conversation_with_an_unknown_definition_is_400_and_creates_nothing(world, agent):
    body = agent_request(world, agent) | {"agentDefinitionId": "00000000-0000-0000-0000-000000000001"}

    status, response = await sse_turn(world["client"], body)

    assert status == 400 and response["code"] == "agent_definition_not_found"
    assert await Conversation.objects.acount() == 0


async def test_a_new_conversation_by_project_slug_still_finds_its_definition(world, agent, scripted):
    scripted.turns += [text("Paris.")]
    body = agent_request(world, agent) | {"projectId": world["project"].slug}

    status, frames = await sse_turn(world["client"], body)

    assert status == 200 and types(frames)[-1] == "done"
    assert await adb(lambda: Conversation.objects.get().agent_definition_id)() == agent.id


def test_an_agent_turn_reads_what_its_tools_have_to_work_on_in_its_admission_statement(world, agent):
    project = str(world["project"].id)
    turn, _ = _admit(world, project_id=project, agent_definition_id=str(agent.id))
    claim.claim_release(turn.conversation.id, turn.turn_id)
    document_upload(project=world["project"], name="guide.md", data=b"The Eiffel Tower is in Paris.\n")

    with CaptureQueriesContext(connection) as queries:
        with_documents, _ = _admit(world, project_id=project, agent_definition_id=str(agent.id))
    plain, _ = _admit(world, project_id=project)

    assert turn.tools_available == {"search_passages": False}
    assert len(queries.captured_queries) == 2
    assert with_documents.tools_available == {"search_passages": True}
    assert plain.tools_available is None


async def test_an_agent_is_offered_the_passage_search_only_in_a_project_with_documents(
    world, agent, scripted
):
    scripted.turns += [text("Without."), text("With.")]
    await sse_turn(world["client"], agent_request(world, agent))
    await adb(document_upload)(
        project=world["project"], name="guide.md", data=b"The Eiffel Tower is in Paris.\n"
    )

    status, frames = await sse_turn(world["client"], agent_request(world, agent))

    assert status == 200 and types(frames)[-1] == "done"
    offered = [{t.name for t in call.tools} for call in scripted.calls]
    assert "search_passages" not in offered[0] and "search_passages" in offered[1]
    assert offered[0] | {"search_passages"} == offered[1]

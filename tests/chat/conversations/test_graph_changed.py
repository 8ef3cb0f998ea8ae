"""'Graph changed since this answer' (issue 15 part B): answers store their graph version and the
entities they used; REST flags an older answer when one of those entities changed since."""

from __future__ import annotations

import json

import pytest

from apps.agents.llm.scripted import text, tool_call
from apps.agents.models import AgentRun
from apps.chat.models import Message
from apps.graph_tools.importer import graph_import
from apps.graph_tools.services import approval_decide, approval_request
from apps.projects.selectors import Principal
from tests.chat.conftest import adb, agent_request, sse_turn

pytestmark = pytest.mark.django_db(transaction=True)


async def answered_about_paris(world, agent, scripted) -> dict:
    scripted.turns += [
        [tool_call("get_entity_edges", {"entity_id": "paris"}, id="c1")],
        text(f"[Paris](entity:{world['paris'].id}) is the capital of France."),
    ]
    _, frames = await sse_turn(world["client"], agent_request(world, agent, "Where is Paris?"))
    return frames


async def conversation_messages(world, conversation_id) -> list[dict]:
    response = await world["client"].get(f"/api/chat/conversations/{conversation_id}")
    return json.loads(response.content)["messages"]


def imported(world, *records) -> None:
    graph_import(project=world["project"], lines=[json.dumps(r) for r in records])


async def test_answer_stores_graph_version_and_used_entities_in_context_and_run(world, agent, scripted):
    await adb(imported)(world, {"kind": "entity", "key": "rome", "type": "City", "name": "Rome"})

    frames = await answered_about_paris(world, agent, scripted)

    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    run = await AgentRun.objects.aget(id=frames[0]["runId"])
    assert answer.retrieval_context["graph_version"] == 1 and run.graph_version == 1
    assert set(answer.retrieval_context["entity_ids"]) == {str(world["paris"].id), str(world["france"].id)}


async def test_older_answer_is_flagged_after_an_import_changed_an_entity_it_used(world, agent, scripted):
    frames = await answered_about_paris(world, agent, scripted)
    await adb(imported)(
        world, {"kind": "entity", "key": "paris", "type": "City", "name": "Paris", "description": "Moved"}
    )

    messages = await conversation_messages(world, frames[0]["conversationId"])

    answer = next(m for m in messages if m["id"] == frames[-1]["messageId"])
    assert answer["graphChanged"]["sinceVersion"] == 0 and answer["graphChanged"]["currentVersion"] == 1
    assert answer["graphChanged"]["changes"] == [
        {"version": 1, "action": "import_entity", "entityId": str(world["paris"].id), "name": "Paris"}
    ]


async def test_no_flag_when_only_unrelated_entities_changed(world, agent, scripted):
    frames = await answered_about_paris(world, agent, scripted)
    await adb(imported)(
        world,
        {"kind": "entity", "key": "berlin", "type": "City", "name": "Berlin"},
        {"kind": "entity", "key": "germany", "type": "Country", "name": "Germany"},
        {"kind": "relationship", "type": "CAPITAL_OF", "src": "berlin", "dst": "germany"},
    )

    messages = await conversation_messages(world, frames[0]["conversationId"])

    assert all(m["graphChanged"] is None for m in messages)


async def test_a_new_relationship_at_a_used_entity_flags_the_answer(world, agent, scripted):
    frames = await answered_about_paris(world, agent, scripted)
    await adb(imported)(
        world,
        {"kind": "entity", "key": "seine", "type": "River", "name": "Seine"},
        {"kind": "relationship", "type": "FLOWS_THROUGH", "src": "seine", "dst": "paris"},
    )

    messages = await conversation_messages(world, frames[0]["conversationId"])

    changes = next(m for m in messages if m["id"] == frames[-1]["messageId"])["graphChanged"]["changes"]
    assert [c["action"] for c in changes] == ["import_relationship"]
    assert (changes[0]["src"], changes[0]["dst"]) == ("Seine", "Paris")


async def test_older_answer_is_flagged_after_an_approved_write_changed_an_entity_it_used(
    world, agent, scripted
):
    frames = await answered_about_paris(world, agent, scripted)
    approval = await adb(approval_request)(
        project_id=world["project"].id,
        tool_name="update_entity",
        arguments={"entity_id": "paris", "name": "Paris, France"},
        requested_by_id=world["user"].id,
    )
    await adb(approval_decide)(principal=Principal(user=world["user"]), approval_id=approval.id, approve=True)

    messages = await conversation_messages(world, frames[0]["conversationId"])

    changes = next(m for m in messages if m["id"] == frames[-1]["messageId"])["graphChanged"]["changes"]
    assert changes == [
        {"version": 1, "action": "update_entity", "entityId": str(world["paris"].id), "name": "Paris, France"}
    ]

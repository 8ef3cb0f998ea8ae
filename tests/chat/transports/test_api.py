"""Conversation and agent-run routes (PROTOCOL §2): mine only, others answer 404."""

import pytest
from django.test import Client

from apps.agents.definitions import default_agents_install
from apps.agents.llm.scripted import text, tool_call
from apps.agents.models import AgentDefinition
from tests.chat.conftest import adb, sse_turn
from tests.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def _sync_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


async def sync_client(user) -> Client:
    return await adb(_sync_client)(user)


async def two_conversations(world, scripted):
    scripted.turns += [text("one"), text("two")]
    project = str(world["project"].id)
    _, a = await sse_turn(world["client"], {"message": "first question", "projectId": project})
    _, b = await sse_turn(world["client"], {"message": "second question", "projectId": project})
    return a[0]["conversationId"], b[0]["conversationId"]


async def test_list_my_conversations_newest_first(world, scripted):
    first, second = await two_conversations(world, scripted)
    client = await sync_client(world["user"])

    body = await adb(client.get)(f"/api/chat/conversations?projectId={world['project'].id}")

    items = body.json()["items"]
    assert [c["id"] for c in items] == [second, first]
    assert items[0]["title"] == "second question"
    assert set(items[0]) == {"id", "projectId", "title", "agentDefinitionId", "createdAt", "updatedAt"}


async def test_read_one_conversation_with_its_messages(world, scripted):
    default_agents_install_async = adb(default_agents_install)
    await default_agents_install_async(project=world["project"])
    agent = await AgentDefinition.objects.aget(project=world["project"], name="graph-query-agent")
    scripted.turns += [[tool_call("get_entity_edges", {"entity_id": "paris"}, id="k")], text("Paris.")]
    _, frames = await sse_turn(
        world["client"],
        {"message": "Paris?", "projectId": str(world["project"].id), "agentDefinitionId": str(agent.id)},
    )
    client = await sync_client(world["user"])

    body = (await adb(client.get)(f"/api/chat/conversations/{frames[0]['conversationId']}")).json()

    assert body["agentDefinitionId"] == str(agent.id)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert body["messages"][1]["toolCalls"][0]["name"] == "get_entity_edges"
    assert body["messages"][-1]["retrievalContext"] == {
        "agent_run_id": frames[-1]["runId"],
        "graph_version": 0,
        "entity_ids": [str(world["paris"].id), str(world["france"].id)],
    }
    assert set(body["messages"][0]) == {
        "graphChanged",
        "stale",
        "id",
        "role",
        "content",
        "toolCalls",
        "retrievalContext",
        "citations",
        "createdAt",
        "feedback",
        "usage",
    }


async def test_rename_and_delete_a_conversation(world, scripted):
    first, _ = await two_conversations(world, scripted)
    client = await sync_client(world["user"])

    renamed = await adb(client.patch)(
        f"/api/chat/conversations/{first}", {"title": "Renamed"}, content_type="application/json"
    )
    deleted = await adb(client.delete)(f"/api/chat/conversations/{first}")
    gone = await adb(client.get)(f"/api/chat/conversations/{first}")

    assert renamed.json()["title"] == "Renamed"
    assert deleted.status_code == 204
    assert gone.status_code == 404


async def test_another_users_conversation_is_404_everywhere(world, scripted):
    first, _ = await two_conversations(world, scripted)
    stranger = await sync_client(await adb(make_user)())

    responses = [
        await adb(stranger.get)(f"/api/chat/conversations/{first}"),
        await adb(stranger.patch)(
            f"/api/chat/conversations/{first}", {"title": "x"}, content_type="application/json"
        ),
        await adb(stranger.delete)(f"/api/chat/conversations/{first}"),
        await adb(stranger.post)(f"/api/chat/conversations/{first}/cancel"),
    ]
    listed = await adb(stranger.get)("/api/chat/conversations")

    assert [r.status_code for r in responses] == [404, 404, 404, 404]
    assert listed.json() == {"items": [], "count": 0}


async def test_agent_run_audit_trail_for_the_conversation_owner_only(world, scripted):
    await adb(default_agents_install)(project=world["project"])
    agent = await AgentDefinition.objects.aget(project=world["project"], name="graph-query-agent")
    scripted.turns += [[tool_call("hybrid_search", {"query": "France"}, id="h")], text("France.")]
    _, frames = await sse_turn(
        world["client"],
        {"message": "France?", "projectId": str(world["project"].id), "agentDefinitionId": str(agent.id)},
    )
    run_id = frames[-1]["runId"]

    mine = (await adb((await sync_client(world["user"])).get)(f"/api/agent-runs/{run_id}")).json()
    theirs = await adb((await sync_client(await adb(make_user)())).get)(f"/api/agent-runs/{run_id}")

    assert mine["status"] == "success" and mine["stopReason"] == "completed"
    assert mine["conversationId"] == frames[0]["conversationId"]
    assert mine["agentDefinitionId"] == str(agent.id)
    assert mine["stepCount"] == 2
    assert set(mine["usage"]) == {"inputTokens", "outputTokens"}
    assert [(t["toolName"], t["input"], t["stepNumber"]) for t in mine["toolCalls"]] == [
        ("hybrid_search", {"query": "France"}, 1)
    ]
    assert mine["toolCalls"][0]["durationMs"] >= 0
    assert mine["messages"]
    assert theirs.status_code == 404


async def test_cancel_with_no_running_turn_says_so(world, scripted):
    first, _ = await two_conversations(world, scripted)

    response = await adb((await sync_client(world["user"])).post)(f"/api/chat/conversations/{first}/cancel")

    assert response.status_code == 200
    assert response.json() == {"cancelled": False}

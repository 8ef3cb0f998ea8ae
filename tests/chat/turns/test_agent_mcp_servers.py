"""Issue #11 part 3 in real turns: operator-allowlisted MCP servers still work; disabled definitions
answer a clear error and leave the conversation usable."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from apps.agents.llm.scripted import text, tool_call
from apps.agents.models import AgentDefinition
from apps.chat.models import Conversation, Message
from tests.chat.conftest import agent_request, sse_turn, types, ws_connect, ws_turn
from tests.factories import make_agent_definition
from tests.support.mcp_servers import echo_server, echo_stdio_config

pytestmark = pytest.mark.django_db(transaction=True)


def shout_frames(frames):
    return [f for f in frames if f["type"] == "mcp_tool" and f["tool"] == "shout"]


async def test_allowlisted_stdio_server_by_name_works_in_a_real_turn(world, scripted, settings):
    settings.KGCHAT_MCP_STDIO_SERVERS = {"echo": echo_stdio_config()}
    agent = await sync_to_async(make_agent_definition)(world["project"], mcp_servers=[{"stdio": "echo"}])
    scripted.turns += [[tool_call("shout", {"text": "hello"})], text("It said HELLO!")]

    status, frames = await sse_turn(world["client"], agent_request(world, agent, "Shout hello."))

    assert status == 200
    started, completed = shout_frames(frames)
    assert (started["status"], completed["status"]) == ("started", "completed")
    assert "HELLO!" in json.dumps(completed["result"])
    assert types(frames)[-1] == "done" and frames[-1]["messageId"]


async def test_allowlisted_url_works_in_a_real_turn(world, scripted, settings):
    with echo_server("http", "--token", "operator-secret") as port:
        settings.KGCHAT_MCP_URL_ALLOWLIST = [f"127.0.0.1:{port}"]
        entry = {
            "url": f"http://127.0.0.1:{port}/mcp",
            "headers": {"Authorization": "Bearer operator-secret"},
        }
        agent = await sync_to_async(make_agent_definition)(world["project"], mcp_servers=[entry])
        scripted.turns += [[tool_call("shout", {"text": "over http"})], text("Done.")]

        status, frames = await sse_turn(world["client"], agent_request(world, agent, "Shout hello."))

    assert status == 200
    completed = shout_frames(frames)[-1]
    assert completed["status"] == "completed"
    assert "OVER HTTP!" in json.dumps(completed["result"])


async def test_new_turn_with_a_disabled_definition_is_409_and_creates_nothing(world, scripted):
    agent = await sync_to_async(make_agent_definition)(
        world["project"], mcp_servers=[{"command": "sh"}], disabled_reason="Disabled by migration agents.0002"
    )

    status, body = await sse_turn(world["client"], agent_request(world, agent, "Shout hello."))

    assert status == 409
    assert body["code"] == "agent_definition_disabled"
    assert "Disabled by migration agents.0002" in body["error"]
    assert not await Conversation.objects.filter(project=world["project"]).aexists()
    assert scripted.calls == []


async def test_disabled_definition_answers_an_error_frame_and_keeps_the_conversation_usable(world, scripted):
    agent = await sync_to_async(make_agent_definition)(world["project"])
    scripted.turns += [text("First answer."), text("Second answer.")]
    communicator = await ws_connect(world["user"])
    first = await ws_turn(communicator, {"type": "chat.message", **agent_request(world, agent, "first")})
    conversation_id = first[0]["conversationId"]
    await AgentDefinition.objects.filter(id=agent.id).aupdate(disabled_reason="an operator stopped it")

    refused = await ws_turn(
        communicator, {"type": "chat.message", "conversationId": conversation_id, "message": "second"}
    )
    await AgentDefinition.objects.filter(id=agent.id).aupdate(disabled_reason="")
    again = await ws_turn(
        communicator, {"type": "chat.message", "conversationId": conversation_id, "message": "third"}
    )
    await communicator.disconnect()

    (frame,) = refused
    assert frame["type"] == "error" and frame["code"] == "agent_definition_disabled"
    assert "an operator stopped it" in frame["error"]
    assert types(again)[-1] == "done" and again[-1]["messageId"]
    contents = [m.content async for m in Message.objects.filter(conversation_id=conversation_id, role="user")]
    assert sorted(contents) == ["first", "third"]
    assert len(scripted.calls) == 2

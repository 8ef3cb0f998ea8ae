"""Issue #11, red-team finding "deleting a conversation while its turn runs ends the turn with
internal_error" (a foreign-key violation in persist_answer).

Deleting answers 204 at once and cancels the running turn: the turn ends with an ``error`` frame
of code ``conversation_deleted`` and ``done`` (``messageId: null``), stores nothing, and its run
is ``cancelled``. A turn that finishes just after the delete (before any cancel reaches it)
ends the same way instead of failing on the vanished conversation.
"""

import asyncio
import json

import pytest
from channels.testing import WebsocketCommunicator

from apps.agents.definitions import default_agents_install
from apps.agents.llm.scripted import Delay, text
from apps.agents.models import AgentDefinition, AgentRun
from apps.chat.models import Conversation, Message
from apps.chat.turns.service import turn_wait_all
from config.asgi import application
from tests.chat.conftest import adb, session_cookie, types

pytestmark = pytest.mark.django_db(transaction=True)


def _frame(chunk: bytes) -> dict:
    return json.loads(chunk.decode().split("data: ", 1)[1])


async def test_deleting_a_conversation_while_its_sse_turn_streams_stops_the_turn_and_stores_nothing(
    world, scripted
):
    scripted.turns.append([*text("partial "), Delay(30), *text("never")])
    response = await world["client"].post(
        "/api/chat/stream",
        {"message": "hi", "projectId": str(world["project"].id)},
        content_type="application/json",
    )
    stream = response.streaming_content.__aiter__()
    frames = [_frame(await stream.__anext__()), _frame(await stream.__anext__())]  # meta, token
    conversation_id = frames[0]["conversationId"]

    deleted = await world["client"].delete(f"/api/chat/conversations/{conversation_id}")
    frames += [_frame(chunk) async for chunk in stream]
    await turn_wait_all()

    assert deleted.status_code == 204
    assert types(frames) == ["meta", "token", "error", "done"]
    assert frames[2]["code"] == "conversation_deleted" and frames[3]["messageId"] is None
    assert not await Conversation.objects.filter(id=conversation_id).aexists()
    assert not await Message.objects.filter(conversation_id=conversation_id).aexists()


async def test_deleting_a_conversation_while_its_agent_turn_runs_on_the_websocket_cancels_the_run(
    world, scripted
):
    await adb(default_agents_install)(project=world["project"])
    agent = await AgentDefinition.objects.aget(project=world["project"], name="graph-query-agent")
    scripted.turns.append([*text("partial "), Delay(30), *text("never")])
    session = await adb(session_cookie)(world["user"])
    communicator = WebsocketCommunicator(application, "/ws/chat/", headers=[(b"origin", b"http://127.0.0.1")])
    communicator.scope["headers"].append((b"cookie", f"sessionid={session}".encode()))
    assert (await communicator.connect())[0]
    await communicator.send_json_to(
        {
            "type": "chat.message",
            "message": "hi",
            "projectId": str(world["project"].id),
            "agentDefinitionId": str(agent.id),
        }
    )
    frames = [
        await communicator.receive_json_from(timeout=30),
        await communicator.receive_json_from(timeout=30),
    ]
    conversation_id = frames[0]["conversationId"]

    deleted = await world["client"].delete(f"/api/chat/conversations/{conversation_id}")
    while frames[-1]["type"] != "done":
        frames.append(await communicator.receive_json_from(timeout=30))
    await turn_wait_all()
    await communicator.disconnect()

    assert deleted.status_code == 204
    assert types(frames) == ["meta", "token", "error", "done"]
    assert frames[2]["code"] == "conversation_deleted" and frames[3]["messageId"] is None
    run = await AgentRun.objects.aget(id=frames[0]["runId"])
    assert run.status == "cancelled"
    assert not await Message.objects.filter(conversation_id=conversation_id).aexists()


async def test_a_turn_finishing_after_its_conversation_vanished_ends_with_conversation_deleted(
    world, scripted
):
    reached = asyncio.Event()

    def answer(messages, tools):
        reached.set()
        return [*text("an "), Delay(3), *text("answer")]  # time for the test to delete

    scripted.turns.append(answer)
    response = await world["client"].post(
        "/api/chat/stream",
        {"message": "hi", "projectId": str(world["project"].id)},
        content_type="application/json",
    )
    stream = response.streaming_content.__aiter__()
    first = _frame(await stream.__anext__())
    await asyncio.wait_for(reached.wait(), 30)

    # Gone without a cancel reaching the turn (as when the delete lands just as the answer is stored).
    await Conversation.objects.filter(id=first["conversationId"]).adelete()
    frames = [first] + [_frame(chunk) async for chunk in stream]
    await turn_wait_all()

    assert types(frames)[-2:] == ["error", "done"]
    assert frames[-2]["code"] == "conversation_deleted" and frames[-1]["messageId"] is None
    assert not await Message.objects.filter(conversation_id=first["conversationId"]).aexists()

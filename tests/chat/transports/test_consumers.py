"""The websocket consumer (apps/chat/consumers.py): the same turns and codes as REST, cancel, subscribe, 4401."""

import json

import pytest
from channels.testing import WebsocketCommunicator

from apps.agents.llm.scripted import Delay, text, tool_call
from apps.agents.models import AgentRun
from apps.chat.models import Conversation, Message
from config.asgi import application
from tests.chat.conftest import adb, agent_request, sse_turn, tokens, types, ws_connect, ws_turn
from tests.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "Which country is Paris the capital of?"


async def test_websocket_agent_turn_streams_the_same_frames(world, agent, scripted):
    scripted.turns += [
        [tool_call("get_entity_edges", {"entity_id": "paris"}, id="w1")],
        text("Paris ", "is in France."),
    ]
    communicator = await ws_connect(world["user"])

    frames = await ws_turn(communicator, {"type": "chat.message", **agent_request(world, agent, QUESTION)})

    # "Paris " waits for the next words (a name is checked whole before it streams), so the two
    # deltas may arrive as one token frame.
    assert types(frames)[:3] == ["meta", "mcp_tool", "mcp_tool"] and types(frames)[-1] == "done"
    assert set(types(frames)[3:-1]) == {"token"}
    assert tokens(frames) == "Paris is in France."
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    await communicator.disconnect()


@pytest.mark.parametrize(
    "raw",
    [
        "{not json",
        json.dumps([1]),
        json.dumps({"type": "chat.nope"}),
        json.dumps({"type": "chat.message"}),
        json.dumps({"type": "chat.subscribe"}),
    ],
)
async def test_websocket_malformed_input_gets_invalid_request_and_stays_open(world, raw):
    communicator = await ws_connect(world["user"])

    await communicator.send_to(text_data=raw)
    frame = await communicator.receive_json_from(timeout=5)
    await communicator.send_to(text_data=json.dumps({"type": "chat.nope"}))
    again = await communicator.receive_json_from(timeout=5)

    assert frame["type"] == "error" and frame["code"] == "invalid_request"
    assert again["code"] == "invalid_request"
    await communicator.disconnect()


async def test_websocket_invalid_agent_definition_gets_the_rest_code(world, scripted):
    communicator = await ws_connect(world["user"])

    frames = await ws_turn(
        communicator,
        {
            "type": "chat.message",
            "message": "hi",
            "projectId": str(world["project"].id),
            "agentDefinitionId": "00000000-0000-0000-0000-000000000000",
        },
    )

    assert frames == [
        {"type": "error", "error": "agent definition not found", "code": "agent_definition_not_found"}
    ]
    assert not await Conversation.objects.aexists()
    await communicator.disconnect()


async def test_websocket_without_session_is_closed_4401():
    communicator = WebsocketCommunicator(application, "/ws/chat/", headers=[(b"origin", b"http://127.0.0.1")])

    connected, _ = await communicator.connect()
    closed = await communicator.receive_output(timeout=5)

    assert connected
    assert closed == {"type": "websocket.close", "code": 4401}


async def test_websocket_refuses_another_users_conversation(world, agent, scripted):
    scripted.turns += [text("private")]
    _, frames = await sse_turn(world["client"], agent_request(world, agent, QUESTION))
    stranger = await adb(make_user)()
    communicator = await ws_connect(stranger)

    await communicator.send_json_to({"type": "chat.subscribe", "conversationId": frames[0]["conversationId"]})
    refused = await communicator.receive_json_from(timeout=5)
    sent = await ws_turn(
        communicator, {"type": "chat.message", "message": "x", "conversationId": frames[0]["conversationId"]}
    )

    assert refused["code"] == "conversation_not_found"
    assert sent[0]["code"] == "conversation_not_found"
    await communicator.disconnect()


async def test_cancel_stops_the_run_and_ends_the_turn(world, agent, scripted):
    scripted.turns += [[text("thinking ")[0], Delay(5), *text("never")]]
    communicator = await ws_connect(world["user"])
    await communicator.send_json_to({"type": "chat.message", **agent_request(world, agent, QUESTION)})
    meta = await communicator.receive_json_from(timeout=5)
    first_token = await communicator.receive_json_from(timeout=5)

    await communicator.send_json_to({"type": "chat.cancel", "conversationId": meta["conversationId"]})
    rest = []
    while not rest or rest[-1]["type"] != "done":
        rest.append(await communicator.receive_json_from(timeout=5))

    assert first_token["token"] == "thinking "
    assert [f["type"] for f in rest] == ["error", "done"] and rest[0]["code"] == "cancelled"
    run = await AgentRun.objects.aget(id=meta["runId"])
    assert run.status == "cancelled"
    answer = await Message.objects.aget(id=rest[-1]["messageId"])
    assert answer.content == "thinking " and answer.retrieval_context["stop_reason"] == "cancelled"
    await communicator.disconnect()


async def test_subscribe_after_seq_replays_the_running_turn_in_a_second_socket(world, agent, scripted):
    scripted.turns += [[*text("one ", "two "), Delay(0.3), *text("three")]]
    first = await ws_connect(world["user"])
    await first.send_json_to({"type": "chat.message", **agent_request(world, agent, QUESTION)})
    meta = await first.receive_json_from(timeout=5)
    await first.receive_json_from(timeout=5)

    second = await ws_connect(world["user"])
    await second.send_json_to(
        {"type": "chat.subscribe", "conversationId": meta["conversationId"], "afterSeq": 1}
    )
    replayed = []
    while not replayed or replayed[-1]["type"] != "done":
        replayed.append(await second.receive_json_from(timeout=5))

    assert [f["seq"] for f in replayed] == [2, 3, 4, 5]
    assert tokens(replayed) == "one two three"
    await first.disconnect()
    await second.disconnect()


async def test_closing_the_socket_does_not_lose_the_turn(world, agent, scripted):
    scripted.turns += [[*text("slow "), Delay(0.3), *text("answer")]]
    communicator = await ws_connect(world["user"])
    await communicator.send_json_to({"type": "chat.message", **agent_request(world, agent, QUESTION)})
    meta = await communicator.receive_json_from(timeout=5)

    await communicator.disconnect()
    from apps.chat.turns.service import turn_wait_all

    await turn_wait_all()

    rows = [
        m.content
        async for m in Message.objects.filter(conversation_id=meta["conversationId"]).order_by("created_at")
    ]
    assert rows[-1] == "slow answer"


async def test_a_turn_whose_conversation_watch_fails_still_streams_to_the_end_without_an_error(
    world, agent, scripted, monkeypatch
):
    # Under a starved event loop, Redis's subscription confirmation can time out after the turn
    # has started: the message did not fail, so the socket must not get internal_error.
    from apps.chat.streams.bus import get_bus

    async def unconfirmed(conversation_id):
        raise ConnectionError(f"redis did not confirm the subscription to {conversation_id}")

    monkeypatch.setattr(get_bus(), "watch", unconfirmed)
    scripted.turns += [text("Paris ", "is on the Seine.")]
    communicator = await ws_connect(world["user"])

    frames = await ws_turn(communicator, {"type": "chat.message", **agent_request(world, agent, QUESTION)})

    assert "error" not in types(frames)
    assert types(frames)[-1] == "done"
    assert tokens(frames) == "Paris is on the Seine."
    await communicator.disconnect()


async def test_a_subscribe_whose_conversation_watch_fails_still_replays_the_turn(
    world, agent, scripted, monkeypatch
):
    from apps.chat.streams.bus import get_bus

    scripted.turns += [[*text("one ", "two "), Delay(0.3), *text("three")]]
    first = await ws_connect(world["user"])
    await first.send_json_to({"type": "chat.message", **agent_request(world, agent, QUESTION)})
    meta = await first.receive_json_from(timeout=5)

    async def unconfirmed(conversation_id):
        raise ConnectionError(f"redis did not confirm the subscription to {conversation_id}")

    monkeypatch.setattr(get_bus(), "watch", unconfirmed)
    second = await ws_connect(world["user"])
    await second.send_json_to(
        {"type": "chat.subscribe", "conversationId": meta["conversationId"], "afterSeq": 1}
    )
    replayed = []
    while not replayed or replayed[-1]["type"] != "done":
        replayed.append(await second.receive_json_from(timeout=5))

    assert "error" not in types(replayed)
    assert tokens(replayed) == "one two three"
    await first.disconnect()
    await second.disconnect()

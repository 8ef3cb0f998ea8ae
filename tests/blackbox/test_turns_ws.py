"""Turns over the chat websocket (docs/protocol.md §4): ``chat.message``, ``chat.cancel``,
``chat.subscribe`` with ``afterSeq``, and what a bad or refused message gets."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import websockets

from tests.blackbox.clients import TIMEOUT, socket
from tests.blackbox.covers import covers
from tests.blackbox.model import ScriptedModel
from tests.blackbox.shapes import Turn, check_turn
from tests.blackbox.world import World

CONVERSATION = "GET /api/chat/conversations/{conversation_id}"


@covers("WS chat.message", "frames")
async def test_a_new_plain_conversation_is_answered_over_the_websocket(world: World) -> None:
    ada = world.api("ada")
    async with socket(ada) as ws:
        await ws.send({"type": "chat.message", "message": "What is London?", "projectId": world.project_id})

        turn = await ws.turn()

    assert turn.error is None and turn.meta["agentDefinitionId"] is None
    messages = ada.call(CONVERSATION, 200, conversation_id=turn.meta["conversationId"]).json()["messages"]
    assert [m["id"] for m in messages] == [turn.meta["messageId"], turn.done["messageId"]]
    assert messages[1]["content"] == turn.text == "Here is the answer."


@covers("WS chat.message", "frames")
async def test_an_agent_conversation_and_its_follow_up_are_answered_over_the_websocket(world: World) -> None:
    ada = world.api("ada")
    async with socket(ada) as ws:
        await ws.send(
            {
                "type": "chat.message",
                "message": '#tool get_entity_edges {"entity_id": "london"}\nWho lived in London?',
                "projectId": world.project_id,
                "agentDefinitionId": world.agents["graph-query-agent"],
            }
        )
        first = await ws.turn()
        await ws.send(
            {"type": "chat.message", "message": "Thanks!", "conversationId": first.meta["conversationId"]}
        )
        follow_up = await ws.turn()

    assert [(f["tool"], f["status"]) for f in first.of_type("mcp_tool")] == [
        ("get_entity_edges", "started"),
        ("get_entity_edges", "completed"),
    ]
    assert [c["key"] for c in first.done["citations"]] == ["london"]
    assert follow_up.meta["conversationId"] == first.meta["conversationId"]
    assert follow_up.meta["runId"] not in {None, first.meta["runId"]} and follow_up.error is None
    messages = ada.call(CONVERSATION, 200, conversation_id=first.meta["conversationId"]).json()["messages"]
    assert messages[-1]["id"] == follow_up.done["messageId"] and messages[-1]["content"] == follow_up.text


@covers("WS chat.cancel", "frames", "error not_running")
async def test_chat_cancel_stops_the_running_turn_and_nothing_else(
    world: World, model: ScriptedModel
) -> None:
    ada = world.api("ada")
    async with socket(ada) as ws:
        await ws.send(
            {
                "type": "chat.message",
                "message": "#hold ws-cancel\nSlowly",
                "projectId": world.project_id,
                "agentDefinitionId": world.agents["graph-query-agent"],
            }
        )
        started = [await ws.receive(), await ws.receive()]  # meta, the first text
        conversation_id = started[0]["conversationId"]

        await ws.send({"type": "chat.cancel", "conversationId": conversation_id})

        turn = Turn([*started, *await ws.frames_until_done()])
        model.release("ws-cancel")
        await ws.send({"type": "chat.cancel", "conversationId": conversation_id})
        nothing_to_cancel = await ws.next_event()

    assert turn.error is not None and turn.error["code"] == "cancelled"
    assert nothing_to_cancel["code"] == "not_running"
    run = ada.call("GET /api/agent-runs/{run_id}", 200, run_id=started[0]["runId"]).json()
    assert run["status"] == "cancelled"


@covers("WS chat.subscribe", "frames")
async def test_another_socket_follows_a_running_turn_from_after_a_seq_and_replays_a_finished_one(
    world: World, model: ScriptedModel
) -> None:
    ada = world.api("ada")
    async with socket(ada) as first, socket(ada) as second:
        await first.send(
            {"type": "chat.message", "message": "#hold ws-resume\nResume me", "projectId": world.project_id}
        )
        started = [await first.receive(), await first.receive()]
        conversation_id = started[0]["conversationId"]

        await second.send({"type": "chat.subscribe", "conversationId": conversation_id, "afterSeq": 1})
        replayed = await second.receive()
        model.release("ws-resume")
        resumed = [replayed, *await second.frames_until_done()]
        original = Turn([*started, *await first.frames_until_done()])

    check_turn(resumed, first_seq=2)
    assert resumed == original.frames[1:]
    async with socket(ada) as late:
        await late.send({"type": "chat.subscribe", "conversationId": conversation_id, "afterSeq": 2})
        after_the_end = await late.frames_until_done()
    assert after_the_end == original.frames[2:]


@covers("WS chat.message", "error invalid_request")
@covers("WS chat.subscribe", "error invalid_request", "error conversation_not_found")
async def test_bad_websocket_messages_get_invalid_request_and_the_socket_stays_open(world: World) -> None:
    ada = world.api("ada")
    bad = [
        "{not json",
        "[1, 2]",
        json.dumps({"type": "chat.shout"}),
        json.dumps({"type": "chat.subscribe"}),
        json.dumps({"type": "chat.subscribe", "conversationId": str(uuid.uuid4()), "afterSeq": "many"}),
        json.dumps({"type": "chat.message", "message": "Nul \u0000", "projectId": world.project_id}),
        json.dumps({"type": "chat.message", "message": "", "projectId": world.project_id}),
    ]
    async with socket(ada) as ws:
        answers = []
        for message in bad:
            await ws.send(message)
            answers.append(await ws.next_event())
        await ws.send({"type": "chat.subscribe", "conversationId": str(uuid.uuid4())})
        unknown = await ws.next_event()
        await ws.send({"type": "chat.message", "message": "Still there?", "projectId": world.project_id})
        turn = await ws.turn()

    assert [a["code"] for a in answers] == ["invalid_request"] * len(bad)
    assert unknown["code"] == "conversation_not_found"
    assert turn.error is None


@covers(
    "WS chat.message",
    "error message_too_long",
    "error agent_definition_not_found",
    "error project_not_found",
    "error conversation_not_found",
    "error turn_in_progress",
)
async def test_a_refused_chat_message_is_an_error_frame_with_the_rest_code(
    world: World, model: ScriptedModel
) -> None:
    ada = world.api("ada")
    refused = {
        "message_too_long": {"message": "x" * 32001, "projectId": world.project_id},
        "agent_definition_not_found": {
            "message": "Hi",
            "projectId": world.project_id,
            "agentDefinitionId": str(uuid.uuid4()),
        },
        "project_not_found": {"message": "Hi", "projectId": str(uuid.uuid4())},
        "conversation_not_found": {"message": "Hi", "conversationId": str(uuid.uuid4())},
    }
    async with socket(ada) as ws:
        codes = {}
        for expected, body in refused.items():
            await ws.send({"type": "chat.message", **body})
            codes[expected] = (await ws.next_event())["code"]
        await ws.send(
            {"type": "chat.message", "message": "#hold ws-busy\nBusy", "projectId": world.project_id}
        )
        meta = await ws.receive()
        await ws.send({"type": "chat.message", "message": "Again", "conversationId": meta["conversationId"]})
        busy = await ws.next_event()
        model.release("ws-busy")

    assert codes == {code: code for code in refused}
    assert busy["code"] == "turn_in_progress"


@covers("WS connect", "4401")
async def test_a_websocket_without_a_session_is_closed_with_4401(world: World) -> None:
    url = world.url.replace("http://", "ws://") + "/ws/chat/"

    async with websockets.connect(url, origin=world.url, open_timeout=TIMEOUT) as ws:
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), TIMEOUT)

    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401

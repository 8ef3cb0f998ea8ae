"""A turn another tab, device or API client starts reaches every tab showing the conversation
(issue #23 item 7): the ``turn_started`` event with the user's message, then the turn's frames, in
this process and in another one through Redis; the sending tab gets its turn once."""

from __future__ import annotations

import asyncio

import pytest

from apps.agents.llm.scripted import text
from apps.chat.streams.bus import set_bus
from apps.chat.streams.frames import MetaFrame, TurnStartedFrame
from apps.chat.streams.redis_bus import RedisFrameBus
from tests.chat.conftest import sse_turn, tokens, types, ws_connect, ws_turn
from tests.chat.transports.test_approval_watchers import frames_until_done, watching_tab
from tests.support.redis_server import redis_server

pytestmark = pytest.mark.django_db(transaction=True)


async def first_turn(world, scripted) -> str:
    """A plain conversation with one answered message; its id."""
    scripted.turns.append(text("Paris is in France."))
    _, frames = await sse_turn(
        world["client"], {"message": "Where is Paris?", "projectId": str(world["project"].id)}
    )
    return str(frames[0]["conversationId"])


async def test_a_message_sent_in_one_tab_appears_in_the_other_tab_and_its_answer_streams_there(
    world, scripted
):
    conversation_id = await first_turn(world, scripted)
    watcher = await watching_tab(world["user"], conversation_id)
    sender = await ws_connect(world["user"])
    scripted.turns.append(text("Its capital ", "is Paris."))

    sent = await ws_turn(
        sender, {"type": "chat.message", "conversationId": conversation_id, "message": "And France?"}
    )
    seen = await frames_until_done(watcher)

    event = seen[0]
    assert event == {
        "type": "turn_started",
        "conversationId": conversation_id,
        "messageId": sent[0]["messageId"],
        "content": "And France?",
        "createdAt": event["createdAt"],
    }
    assert seen[1:] == sent, "the watcher follows the turn from its meta frame on"
    assert tokens(seen) == "Its capital is Paris."
    assert "turn_started" not in types(sent), "the sending tab follows its own turn without the event"
    assert await sender.receive_nothing(timeout=0.2)
    await watcher.disconnect()
    await sender.disconnect()


async def test_a_turn_started_over_rest_reaches_a_tab_showing_the_conversation(world, scripted):
    conversation_id = await first_turn(world, scripted)
    watcher = await watching_tab(world["user"], conversation_id)
    scripted.turns.append(text("Europe."))

    _, streamed = await sse_turn(
        world["client"], {"message": "Which continent?", "conversationId": conversation_id}
    )
    seen = await frames_until_done(watcher)

    assert (seen[0]["type"], seen[0]["messageId"], seen[0]["content"]) == (
        "turn_started",
        streamed[0]["messageId"],
        "Which continent?",
    )
    assert tokens(seen) == tokens(streamed) == "Europe."
    await watcher.disconnect()


async def test_a_turn_started_in_one_process_is_announced_to_watchers_of_another_through_redis(
    world, scripted
):
    conversation_id = await first_turn(world, scripted)
    with redis_server() as url:
        set_bus(RedisFrameBus(url))
        other_process = RedisFrameBus(url)
        watch = await other_process.watch(conversation_id)
        scripted.turns.append(text("Europe."))

        _, streamed = await sse_turn(
            world["client"], {"message": "Which continent?", "conversationId": conversation_id}
        )
        event = await asyncio.wait_for(anext(watch), timeout=10)
        turn = [f async for f in other_process.subscribe(conversation_id, include_finished=True)]
        await watch.aclose()

    assert isinstance(event, TurnStartedFrame)
    assert (event.messageId, event.content) == (streamed[0]["messageId"], "Which continent?")
    assert isinstance(turn[0], MetaFrame) and turn[0].messageId == event.messageId
    assert turn[-1].type == "done"

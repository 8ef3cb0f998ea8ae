"""Merged text deltas (KGCHAT_STREAM_COALESCE_MS): fewer token frames, the same text, the same stored answer."""

import asyncio
import time

import pytest

from apps.agents.llm.base import TextDelta
from apps.agents.llm.scripted import Delay, Pace, text, tool_call
from apps.chat.models import Message
from tests.chat.conftest import agent_request, sse_turn, tokens, types, ws_connect, ws_turn

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = [f"w{i} " for i in range(200)]


async def stored_answer(conversation_id):
    rows = [m async for m in Message.objects.filter(conversation_id=conversation_id).order_by("created_at")]
    return rows[-1].content


async def test_instant_deltas_arrive_in_fewer_frames_with_the_same_text_as_stored(
    world, agent, scripted, settings
):
    settings.KGCHAT_STREAM_COALESCE_MS = 500
    scripted.turns += [[tool_call("get_entity_edges", {"entity_id": "paris"})], text(*WORDS)]

    _, frames = await sse_turn(world["client"], agent_request(world, agent, "What is Paris?"))

    token_frames = [f["token"] for f in frames if f["type"] == "token"]
    assert token_frames[0] == WORDS[0]  # the first delta is sent at once, alone
    assert any(len(token.split()) > 1 for token in token_frames[1:])  # later ones merged
    assert tokens(frames) == "".join(WORDS)
    assert await stored_answer(frames[0]["conversationId"]) == "".join(WORDS)
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert types(frames)[-1] == "done"


async def test_a_slow_model_still_streams_delta_by_delta(world, agent, scripted, settings):
    settings.KGCHAT_STREAM_COALESCE_MS = 10
    scripted.turns += [
        [tool_call("get_entity_edges", {"entity_id": "paris"})],
        # Lower-case words: a capitalised one may begin a name, which waits for its next word (#47).
        [TextDelta(text="it "), Delay(0.1), TextDelta(text="is "), Delay(0.1), TextDelta(text="big.")],
    ]

    _, frames = await sse_turn(world["client"], agent_request(world, agent, "What is Paris?"))

    assert [f["token"] for f in frames if f["type"] == "token"] == ["it ", "is ", "big."]
    assert await stored_answer(frames[0]["conversationId"]) == "it is big."


async def test_under_a_lagging_loop_merged_frames_carry_all_text_in_order_and_replay_the_same(
    world, agent, scripted, settings
):
    settings.KGCHAT_STREAM_COALESCE_MS = 20
    scripted.pace = Pace(first_token_seconds=0.0, tokens_per_second=200)
    scripted.turns += [[tool_call("get_entity_edges", {"entity_id": "paris"})], text(*WORDS[:60])]
    stop = asyncio.Event()

    async def block_the_loop() -> None:  # a loaded process: every pass of the loop is late
        while not stop.is_set():
            time.sleep(0.03)  # noqa: ASYNC251 - blocking the loop is the point
            await asyncio.sleep(0.01)

    blocker = asyncio.create_task(block_the_loop())
    first = await ws_connect(world["user"])
    frames = await ws_turn(first, {"type": "chat.message", **agent_request(world, agent, "What is Paris?")})
    stop.set()
    await blocker
    second = await ws_connect(world["user"])
    replayed = await ws_turn(
        second, {"type": "chat.subscribe", "conversationId": frames[0]["conversationId"], "afterSeq": 1}
    )

    token_frames = [f for f in frames if f["type"] == "token"]
    assert any(len(f["token"].split()) > 1 for f in token_frames)  # merged
    assert tokens(frames) == "".join(WORDS[:60])
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert types(frames)[-1] == "done"
    assert replayed == frames[1:]
    assert await stored_answer(frames[0]["conversationId"]) == "".join(WORDS[:60])
    await first.disconnect()
    await second.disconnect()

"""Merged text deltas (KGCHAT_STREAM_COALESCE_MS): fewer token frames, the same text, the same stored answer."""

import pytest

from apps.agents.llm.base import TextDelta
from apps.agents.llm.scripted import Delay, text, tool_call
from apps.chat.models import Message
from tests.chat.conftest import agent_request, sse_turn, tokens, types

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
        [TextDelta(text="Paris "), Delay(0.1), TextDelta(text="is "), Delay(0.1), TextDelta(text="big.")],
    ]

    _, frames = await sse_turn(world["client"], agent_request(world, agent, "What is Paris?"))

    assert [f["token"] for f in frames if f["type"] == "token"] == ["Paris ", "is ", "big."]
    assert await stored_answer(frames[0]["conversationId"]) == "Paris is big."

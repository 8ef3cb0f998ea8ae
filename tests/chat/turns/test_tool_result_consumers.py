"""Issue #47 item 6: each consumer of a long tool result gets its own limit from the whole result.

An agent searches 30 entities with 12,000-character descriptions (about 360,000 characters of
JSON): the audit trail (``GET /api/agent-runs/{run}``, ``kb.agent_run_tool_calls``) and the run's
ADK session (``kb.agent_run_events``) keep all 30; the ``mcp_tool`` frame is past
``KGCHAT_FRAME_RESULT_MAX_CHARS`` and carries ``{truncated, preview}``; the model, and the
conversation's tool row the next turn reads, get at most ``KGCHAT_TOOL_RESULT_MAX_CHARS``. The
same through the small-model loop.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from apps.agents.definitions import default_agents_install
from apps.agents.llm.base import ChatMessage
from apps.agents.llm.scripted import text, tool_call
from apps.agents.loop.turn import SmallModelTurn
from apps.agents.models import AgentDefinition, AgentRunEvent, AgentRunToolCall
from apps.chat.models import Message
from tests.chat.conftest import adb, agent_request, sse_turn
from tests.factories import make_entity
from tests.llm_server import Json, LLMTestServer, Stream, completion, text_chunks

pytestmark = pytest.mark.django_db(transaction=True)

SEARCH = {"query": "zeppelin", "limit": 50}
DESCRIPTION_CHARS = 12_000


@pytest.fixture
def zeppelins(world) -> None:
    """30 airships whose descriptions are 12,000 characters each."""
    for n in range(30):
        filler = f"The zeppelin airship number {n} flew over the sea. " * 300
        make_entity(
            world["project"],
            f"zeppelin-{n}",
            type="Airship",
            name=f"Zeppelin {n}",
            description=filler[:DESCRIPTION_CHARS],
        )


def _completed(frames: list[dict[str, Any]], tool: str) -> dict[str, Any]:
    return next(
        f for f in frames if f["type"] == "mcp_tool" and f["tool"] == tool and f["status"] == "completed"
    )


async def _audited(client: Any, run_id: str, tool: str) -> Any:
    run = json.loads((await client.get(f"/api/agent-runs/{run_id}")).content)
    return next(c["output"] for c in run["toolCalls"] if c["toolName"] == tool)


async def _stored_tool_output(conversation_id: str, tool: str) -> Any:
    rows = [m async for m in Message.objects.filter(conversation_id=conversation_id, role="tool")]
    return next(c["output"] for m in rows for c in m.tool_calls if c["name"] == tool)


def _results_of(messages: list[ChatMessage], tool: str) -> list[ChatMessage]:
    calls = {c.id for m in messages for c in m.tool_calls if c.name == tool}
    return [m for m in messages if m.role == "tool" and m.tool_call_id in calls]


def _whole(result: Any) -> bool:
    results = result["results"]
    return len(results) == 30 and all(len(r["description"]) == DESCRIPTION_CHARS for r in results)


def _shortened_for_the_model(content: str, limit: int) -> bool:
    seen = json.loads(content)
    return len(content) <= limit and seen["truncated"] is True and 0 < len(seen["results"]) < 30


async def test_a_long_search_is_whole_in_the_audit_a_preview_in_the_frame_and_within_the_limit_for_the_model(
    world, zeppelins, agent, scripted, settings
):
    scripted.turns += [[tool_call("hybrid_search", SEARCH, id="z1")], text("Many zeppelins.")]

    _, frames = await sse_turn(world["client"], agent_request(world, agent, "Which zeppelins are there?"))

    frame = _completed(frames, "hybrid_search")["result"]
    assert frame["truncated"] is True and len(frame["preview"]) == settings.KGCHAT_FRAME_RESULT_MAX_CHARS
    assert _whole(await _audited(world["client"], frames[0]["runId"], "hybrid_search"))
    recorded = await AgentRunToolCall.objects.aget(run_id=frames[0]["runId"], call_id="z1")
    assert _whole(recorded.output)
    events = [e.event async for e in AgentRunEvent.objects.filter(run_id=frames[0]["runId"])]
    responses = [
        p["functionResponse"]["response"]
        for e in events
        for p in (e.get("content") or {}).get("parts") or []
        if "functionResponse" in p
    ]
    assert [_whole(r) for r in responses] == [True]
    given = scripted.calls[1].messages[-1]
    assert given.role == "tool" and _shortened_for_the_model(
        given.content, settings.KGCHAT_TOOL_RESULT_MAX_CHARS
    )
    kept = await _stored_tool_output(frames[0]["conversationId"], "hybrid_search")
    assert kept == json.loads(given.content)


async def test_a_frame_under_its_limit_carries_the_whole_result_the_model_did_not_get(
    world, zeppelins, agent, scripted, settings
):
    settings.KGCHAT_FRAME_RESULT_MAX_CHARS = 1_000_000
    scripted.turns += [[tool_call("hybrid_search", SEARCH, id="z2")], text("Many zeppelins.")]

    _, frames = await sse_turn(world["client"], agent_request(world, agent, "Which zeppelins are there?"))

    assert _whole(_completed(frames, "hybrid_search")["result"])
    assert _shortened_for_the_model(
        scripted.calls[1].messages[-1].content, settings.KGCHAT_TOOL_RESULT_MAX_CHARS
    )


@pytest.fixture
def small_model(settings) -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        settings.KGCHAT_MODEL = "local/qwen2.5-1.5b"
        settings.KGCHAT_LOCAL_LLM_URL = server.base_url
        settings.KGCHAT_SMALL_MODEL_PLANS = False
        yield server


@pytest.fixture
def loop_saw(monkeypatch) -> list[list[ChatMessage]]:
    """The messages every step of the small-model loop was given (the loop is the model's side)."""
    steps: list[list[ChatMessage]] = []
    stream = SmallModelTurn.stream

    def spy(self, messages, tools, config):
        steps.append(list(messages))
        return stream(self, messages, tools, config)

    monkeypatch.setattr(SmallModelTurn, "stream", spy)
    return steps


async def test_the_small_model_loop_is_given_the_models_copy_and_the_audit_keeps_the_whole_result(
    world, zeppelins, small_model, loop_saw, settings
):
    await adb(default_agents_install)(project=world["project"])
    agent = await AgentDefinition.objects.aget(project=world["project"], name="graph-query-agent")
    small_model.enqueue(
        Json(completion(json.dumps({"name": "hybrid_search", "arguments": SEARCH}))),
        *[Stream(text_chunks("Many zeppelins.")) for _ in range(8)],
    )

    _, frames = await sse_turn(world["client"], agent_request(world, agent, "Which zeppelins are there?"))

    assert frames[-1]["type"] == "done" and frames[-1]["messageId"] is not None
    frame = _completed(frames, "hybrid_search")["result"]
    assert frame["truncated"] is True and len(frame["preview"]) == settings.KGCHAT_FRAME_RESULT_MAX_CHARS
    assert _whole(await _audited(world["client"], frames[0]["runId"], "hybrid_search"))
    searches = [m for step in loop_saw for m in _results_of(step, "hybrid_search")]
    assert searches and all(
        _shortened_for_the_model(m.content, settings.KGCHAT_TOOL_RESULT_MAX_CHARS) for m in searches
    )

"""Issue #47 item 6 on the agents layer: the model is given at most ``KGCHAT_TOOL_RESULT_MAX_CHARS``
of a tool result however the result reaches it (just returned, decided by a member, replayed from
a resumed run's stored events), while the run's audit keeps the whole result.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from google.genai import types

from apps.agents.adk.model_adapter import convert_messages
from apps.agents.adk.run_state import RunState
from apps.agents.adk.runner import adk_run
from apps.agents.events import ToolResume
from apps.agents.executor import AgentExecutor, ExecuteRequest
from apps.agents.history import HistoryMessage, HistoryToolCall
from apps.agents.llm.base import Done, TextDelta, Usage
from apps.agents.llm.scripted import Delay, ScriptedProvider, tool_call
from apps.agents.models import AgentDefinition, AgentRun, AgentRunEvent, AgentRunToolCall
from apps.agents.services import agent_run_start
from apps.agents.tool_results import as_the_model_saw
from tests.factories import make_agent_definition, make_entity, make_project

SEARCH = {"query": "zeppelin", "limit": 50}
LONG = {"results": [{"id": str(n), "description": "z" * 12_000} for n in range(30)], "total": 30}


def _shortened(content: str, limit: int) -> bool:
    seen = json.loads(content)
    return len(content) <= limit and seen["truncated"] is True and 0 < len(seen["results"]) < 30


def _whole(result: Any) -> bool:
    return len(result["results"]) == 30 and all(len(r["description"]) == 12_000 for r in result["results"])


def test_every_function_response_the_model_is_given_is_within_the_limit(settings) -> None:
    def answer(role: str, call_id: str) -> types.Content:
        response = types.FunctionResponse(id=call_id, name="hybrid_search", response=LONG)
        return types.Content(role=role, parts=[types.Part(function_response=response)])

    # A result just returned (ADK's function event) and a decided approval's result (the new
    # message of the run that continues the conversation, as ``adk_run`` builds it).
    messages = convert_messages([answer("function", "a"), answer("user", "b")])

    assert [m.tool_call_id for m in messages] == ["a", "b"]
    assert all(_shortened(m.content, settings.KGCHAT_TOOL_RESULT_MAX_CHARS) for m in messages)


def test_the_conversation_keeps_the_models_copy_of_a_tool_message(settings) -> None:
    message = HistoryMessage(
        role="tool",
        content=json.dumps(LONG),
        tool_calls=[HistoryToolCall(id="a", name="hybrid_search", output=LONG)],
    )

    kept = as_the_model_saw(message)

    assert _shortened(kept.content, settings.KGCHAT_TOOL_RESULT_MAX_CHARS)
    assert kept.tool_calls[0].output == json.loads(kept.content)
    assert _whole(message.tool_calls[0].output)
    small = HistoryMessage(
        role="tool", content="{}", tool_calls=[HistoryToolCall(id="b", name="x", output={})]
    )
    assert as_the_model_saw(small) is small


@pytest.fixture
def definition() -> AgentDefinition:
    project = make_project()
    for n in range(30):
        filler = f"The zeppelin airship number {n} flew over the sea. " * 300
        make_entity(project, f"zeppelin-{n}", type="Airship", description=filler[:12_000])
    return make_agent_definition(
        project,
        name="graph-query-agent",
        tools=["hybrid_search", "create_entity"],
        model={"name": "scripted/test", "temperature": 0.0},
        max_steps=5,
    )


def _answer() -> list[Any]:
    return [TextDelta(text="Many zeppelins."), Done(usage=Usage(output_tokens=3))]


@pytest.mark.django_db(transaction=True)
async def test_a_resumed_run_gives_the_model_a_stored_long_result_within_the_limit_and_audits_it_whole(
    definition: AgentDefinition, settings
) -> None:
    first = ScriptedProvider(turns=[[tool_call("hybrid_search", SEARCH, id="call-1")], [Delay(3600)]])
    run = await agent_run_start(
        project_id=definition.project_id, agent_definition_id=definition.pk, conversation_id=None
    )
    cut_off = asyncio.create_task(_first_attempt(definition, first, run))
    for _ in range(3000):  # a guard against hanging (30 s), not a timing
        if len(first.calls) == 2:
            break
        await asyncio.sleep(0.01)
    cut_off.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cut_off
    stored = await AgentRunEvent.objects.filter(run=run).order_by("position").alast()
    assert stored is not None and _whole(stored.event["content"]["parts"][0]["functionResponse"]["response"])
    second = ScriptedProvider(turns=[_answer()])

    result = await AgentExecutor().execute(
        ExecuteRequest(agent_definition=definition, message="Zeppelins?", provider=second, run=run, attempt=2)
    )

    assert result.text == "Many zeppelins." and len(second.calls) == 1
    given = second.calls[0].messages[-1]
    assert given.role == "tool" and _shortened(given.content, settings.KGCHAT_TOOL_RESULT_MAX_CHARS)
    audited = await AgentRunToolCall.objects.aget(run=run, call_id="call-1")
    assert _whole(audited.output) and _whole(result.tool_calls[0].output)
    kept = next(m for m in result.messages if m.role == "tool")
    assert _shortened(kept.content, settings.KGCHAT_TOOL_RESULT_MAX_CHARS)


def _first_attempt(definition: AgentDefinition, provider: ScriptedProvider, run: AgentRun) -> Any:
    return adk_run(
        RunState(callback=None, max_steps=5),
        definition=definition,
        provider=provider,
        message="Zeppelins?",
        history=[],
        project_id=definition.project_id,
        sub_definitions=[],
        run_id=run.id,
        user_id="u",
        stop=None,
        share_provider=True,
    )


@pytest.mark.django_db(transaction=True)
async def test_a_decided_calls_long_result_reaches_the_model_within_the_limit(
    definition: AgentDefinition, settings
) -> None:
    call = HistoryToolCall(id="w1", name="create_entity", input={"type": "Airship", "name": "Big"})
    history = [
        HistoryMessage(role="user", content="Add one"),
        HistoryMessage(role="assistant", content="", tool_calls=[call]),
    ]
    provider = ScriptedProvider(turns=[_answer()])

    result = await AgentExecutor().execute(
        ExecuteRequest(
            agent_definition=definition,
            message="Add one",
            history=history,
            provider=provider,
            resume=ToolResume(call_id="w1", tool="create_entity", result=LONG),
        )
    )

    assert result.text == "Many zeppelins."
    given = provider.calls[0].messages[-1]
    assert given.role == "tool" and given.tool_call_id == "w1"
    assert _shortened(given.content, settings.KGCHAT_TOOL_RESULT_MAX_CHARS)
    kept = next(m for m in result.messages if m.role == "tool")
    assert _shortened(kept.content, settings.KGCHAT_TOOL_RESULT_MAX_CHARS)

"""Issue #27: an agent run resumes from its stored ADK events (``kb.agent_run_events``).

The first attempt runs ``adk_run`` alone and is cut off (its task cancelled: nothing of the
executor's closing runs, as when a process dies); the second is the executor with ``attempt=2``,
as the process that takes the turn over runs it. Real SIGKILLs of daphne: tests/chat/turns/test_resume_kill.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apps.agents.adk.run_state import RunState
from apps.agents.adk.runner import adk_run
from apps.agents.events import RunEvent, RunResumed, ToolCallEnd, ToolCallStart
from apps.agents.executor import AgentExecutor, ExecuteRequest
from apps.agents.history import HistoryMessage
from apps.agents.llm.base import Done, TextDelta, Usage
from apps.agents.llm.scripted import Delay, ScriptedProvider, tool_call
from apps.agents.models import AgentDefinition, AgentRun, AgentRunEvent, RunStatus
from apps.agents.services import agent_run_start
from tests.factories import make_agent_definition, make_entity, make_project

pytestmark = pytest.mark.django_db(transaction=True)

HISTORY = [HistoryMessage(role="user", content="hello"), HistoryMessage(role="assistant", content="hi")]


@pytest.fixture
def definition() -> AgentDefinition:
    project = make_project()
    make_entity(project, "acme", type="Company")
    return make_agent_definition(
        project,
        name="graph-query-agent",
        tools=["list_entity_types"],
        model={"name": "scripted/test", "temperature": 0.0},
        max_steps=5,
    )


async def _until(condition: Any) -> None:
    for _ in range(3000):  # a guard against hanging (30 s), not a timing
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the run never got there")


def _first_attempt(definition: AgentDefinition, provider: ScriptedProvider, run: AgentRun) -> Any:
    """The run's first attempt (``adk_run`` alone, as a turn's process runs it), to await or cut off."""
    return adk_run(
        RunState(callback=None, max_steps=5),
        definition=definition,
        provider=provider,
        message="Which types exist?",
        history=HISTORY,
        project_id=definition.project_id,
        sub_definitions=[],
        run_id=run.id,
        user_id="u",
        stop=None,
        share_provider=True,
    )


async def _first_attempt_cut_off(definition: AgentDefinition, provider: ScriptedProvider) -> AgentRun:
    """Run until the provider's last scripted call blocks, then cut the run off there."""
    run = await agent_run_start(
        project_id=definition.project_id, agent_definition_id=definition.pk, conversation_id=None
    )
    task = asyncio.create_task(_first_attempt(definition, provider, run))
    await _until(lambda: len(provider.calls) == len(provider.turns))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return run


async def _second_attempt(definition: AgentDefinition, run: AgentRun, provider: ScriptedProvider):
    events: list[RunEvent] = []
    result = await AgentExecutor().execute(
        ExecuteRequest(
            agent_definition=definition,
            message="Which types exist?",
            history=HISTORY,
            provider=provider,
            run=run,
            attempt=2,
            stream_callback=events.append,
        )
    )
    return result, events


def _answer() -> list[Any]:
    return [TextDelta(text="There is "), TextDelta(text="1 type."), Done(usage=Usage(output_tokens=4))]


async def test_a_run_cut_off_after_its_tool_result_resumes_with_one_model_call_and_no_second_tool_run(
    definition: AgentDefinition,
) -> None:
    first = ScriptedProvider(turns=[[tool_call("list_entity_types", {}, id="call-1")], [Delay(3600)]])
    run = await _first_attempt_cut_off(definition, first)
    stored = [e async for e in AgentRunEvent.objects.filter(run=run).order_by("position")]
    # The history window (2 seeded events), the user's message, the call, its result.
    assert [(e.seeded, e.author) for e in stored][:3] == [
        (True, "user"),
        (True, "graph_query_agent"),
        (False, "user"),
    ]
    assert stored[-1].event["content"]["parts"][0]["functionResponse"]["id"] == "call-1"
    assert len({e.invocation_id for e in stored if not e.seeded}) == 1

    second = ScriptedProvider(turns=[_answer()])
    result, events = await _second_attempt(definition, run, second)

    assert (result.status, result.text) == (RunStatus.SUCCESS, "There is 1 type.")
    assert len(second.calls) == 1  # the finished first step is not called again
    assert [m.role for m in second.calls[0].messages][-2:] == ["assistant", "tool"]
    assert not [e for e in events if isinstance(e, ToolCallStart | ToolCallEnd)]  # not run again
    resumed = [e for e in events if isinstance(e, RunResumed)]
    assert [(r.attempt, [c.call_id for c in r.tool_calls]) for r in resumed] == [(2, ["call-1"])]
    assert [c.call_id for c in result.tool_calls] == ["call-1"]
    assert result.steps == 2
    assert [m.role for m in result.messages] == ["assistant", "tool", "assistant"]


async def test_a_run_cut_off_while_its_answer_streams_redoes_only_that_model_call(
    definition: AgentDefinition,
) -> None:
    first = ScriptedProvider(
        turns=[[tool_call("list_entity_types", {}, id="call-1")], [TextDelta(text="There is "), Delay(3600)]]
    )
    run = await _first_attempt_cut_off(definition, first)

    second = ScriptedProvider(turns=[_answer()])
    result, _ = await _second_attempt(definition, run, second)

    # The cut-off call's partial text was never a stored event: no duplicated "There is ".
    assert result.text == "There is 1 type."
    assert len(second.calls) == 1


async def test_a_run_cut_off_after_its_model_step_runs_the_recorded_call_on_resumption(
    definition: AgentDefinition,
) -> None:
    run = await agent_run_start(
        project_id=definition.project_id, agent_definition_id=definition.pk, conversation_id=None
    )
    # What a process leaves when it dies between storing the model's call and running it.
    first = ScriptedProvider(turns=[[tool_call("list_entity_types", {}, id="call-1")], [Delay(3600)]])
    await _first_attempt_cut_off_at_call(definition, first, run)

    second = ScriptedProvider(turns=[_answer()])
    result, events = await _second_attempt(definition, run, second)

    assert result.text == "There is 1 type."
    assert [e.call_id for e in events if isinstance(e, ToolCallEnd)] == ["call-1"]
    assert [c.call_id for c in result.tool_calls] == ["call-1"]
    assert len(second.calls) == 1


async def _first_attempt_cut_off_at_call(
    definition: AgentDefinition, provider: ScriptedProvider, run: AgentRun
) -> None:
    """Run until the model's call is stored, then drop its result (the process died in the tool)."""
    task = asyncio.create_task(_first_attempt(definition, provider, run))
    await _until(lambda: len(provider.calls) == 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = await AgentRunEvent.objects.filter(run=run).order_by("-position").afirst()
    assert last is not None and "functionResponse" in str(last.event)
    await last.adelete()


async def test_a_run_cut_off_after_its_answer_was_stored_ends_with_that_answer_and_no_model_call(
    definition: AgentDefinition,
) -> None:
    """The process died between storing the model's final answer and ADK's end of the agent (seen
    in tests/chat/turns/test_resume_restart.py under load): ADK would call the model again, and the
    answer would stream a second time after the stored one."""
    run = await agent_run_start(
        project_id=definition.project_id, agent_definition_id=definition.pk, conversation_id=None
    )
    first = ScriptedProvider(turns=[[tool_call("list_entity_types", {}, id="call-1")], _answer()])
    await _first_attempt(definition, first, run)
    last = await AgentRunEvent.objects.filter(run=run).order_by("-position").afirst()
    assert last is not None and last.event["actions"].get("endOfAgent")
    await last.adelete()  # the process died before ADK stored the agent's end

    second = ScriptedProvider(turns=[[TextDelta(text="Something else."), Done(usage=Usage())]])
    result, events = await _second_attempt(definition, run, second)

    assert second.calls == []  # the answer is stored: the model is not asked again
    assert (result.status, result.text) == (RunStatus.SUCCESS, "There is 1 type.")
    assert [(r.attempt, r.text) for r in events if isinstance(r, RunResumed)] == [(2, "There is 1 type.")]
    assert not [e for e in events if isinstance(e, ToolCallStart | ToolCallEnd)]
    assert [c.call_id for c in result.tool_calls] == ["call-1"]
    assert result.steps == 2
    assert [m.role for m in result.messages] == ["assistant", "tool", "assistant"]


async def test_a_runs_events_go_in_one_statement_numbered_by_the_database_in_order(definition):
    from asgiref.sync import sync_to_async
    from django.db import connection

    from apps.agents.services import agent_run_events_append

    run = await agent_run_start(
        project_id=definition.project_id, agent_definition_id=definition.pk, conversation_id=None
    )
    rows = [{"position": n, "seeded": n < 2, "author": "user", "event": {"n": n}} for n in range(3)]
    sent: list[str] = []

    def spy(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    # The wrapper goes on the connection of the thread the append's database call runs on.
    await sync_to_async(lambda: connection.execute_wrappers.append(spy))()
    try:
        await agent_run_events_append(run_id=run.id, rows=rows)
    finally:
        await sync_to_async(lambda: connection.execute_wrappers.remove(spy))()
    stored = [e async for e in AgentRunEvent.objects.filter(run=run).order_by("id")]  # numbered in order

    # One statement, the commit not waiting for the WAL flush (resumption guards against the app
    # process dying, which a commit survives once PostgreSQL has it).
    assert len(sent) == 1 and "set_config('synchronous_commit', 'off', true)" in sent[0]
    assert [(e.position, e.seeded, e.event) for e in stored] == [
        (0, True, {"n": 0}),
        (1, True, {"n": 1}),
        (2, False, {"n": 2}),
    ]
    assert all(e.id for e in stored) and all(e.created_at for e in stored)

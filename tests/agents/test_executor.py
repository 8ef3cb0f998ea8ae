"""AgentExecutor: the ADK agent from a definition, the stream callback, limits and the audit trail."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from apps.agents.events import (
    CANCELLED,
    RunError,
    RunEvent,
    StopReason,
    StopSignal,
    TextDelta,
    ToolCallEnd,
    ToolCallStart,
)
from apps.agents.executor import AgentExecutor, ExecuteRequest
from apps.agents.history import HistoryMessage, HistoryToolCall
from apps.agents.llm.base import Done, ErrorEvent, Usage
from apps.agents.llm.openai_compat import OpenAICompatProvider
from apps.agents.llm.scripted import Delay, ScriptedProvider, text, tool_call
from apps.agents.loop.turn import SmallModelTurn
from apps.agents.models import AgentDefinition, AgentRun, AgentRunMessage, AgentRunToolCall
from tests.factories import add_member, make_agent_definition, make_entity, make_project, make_user
from tests.llm_server import Json, LLMTestServer, Stream, completion, text_chunks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def definition() -> AgentDefinition:
    project = make_project()
    make_entity(project, "acme", type="Company")
    make_entity(project, "bob", type="Person")
    make_entity(project, "eve", type="Person")
    return make_agent_definition(
        project,
        name="graph-query-agent",
        system_prompt="You answer from the {graph}.",
        tools=["list_entity_types"],
        model={"name": "scripted/test", "temperature": 0.25},
        max_steps=5,
    )


def tool_then_answer() -> ScriptedProvider:
    return ScriptedProvider(
        turns=[
            [
                tool_call("list_entity_types", {}, id="call-1"),
                Done(usage=Usage(input_tokens=100, output_tokens=10)),
            ],
            [
                TextDelta(text="There are "),
                TextDelta(text="2 types."),
                Done(usage=Usage(input_tokens=150, output_tokens=5)),
            ],
        ]
    )


async def run(
    definition: AgentDefinition, provider: ScriptedProvider, **kwargs: Any
) -> tuple[Any, list[RunEvent]]:
    events: list[RunEvent] = []
    kwargs.setdefault("stream_callback", events.append)
    result = await AgentExecutor().execute(
        ExecuteRequest(agent_definition=definition, message="Which types exist?", provider=provider, **kwargs)
    )
    return result, events


async def test_agent_initialization(definition: AgentDefinition) -> None:
    provider = tool_then_answer()

    result, _ = await run(definition, provider)

    first = provider.calls[0]
    assert first.messages[0].role == "system"
    assert first.messages[0].content.startswith("You answer from the {graph}.")
    assert first.messages[-1].content == "Which types exist?"
    assert [t.name for t in first.tools] == ["list_entity_types"]
    assert first.config.temperature == 0.25
    assert first.config.stream is True
    assert result.model == "scripted"


async def test_execute_runs_the_called_graph_tool_and_returns_its_result_to_the_model(
    definition: AgentDefinition,
) -> None:
    provider = tool_then_answer()

    result, _ = await run(definition, provider)

    assert result.tool_calls[0].tool == "list_entity_types"
    assert result.tool_calls[0].output == {
        "types": [{"type": "Person", "count": 2}, {"type": "Company", "count": 1}]
    }
    tool_message = provider.calls[1].messages[-1]
    assert tool_message.role == "tool" and tool_message.tool_call_id == "call-1"
    assert '"Person"' in tool_message.content


async def test_streamcallback_receives_text_deltas(definition: AgentDefinition) -> None:
    result, events = await run(definition, tool_then_answer())

    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["There are ", "2 types."]
    assert result.text == "There are 2 types."
    assert result.status == "success" and result.stop_reason == "completed"


async def test_streamcallback_receives_tool_call_events(definition: AgentDefinition) -> None:
    _, events = await run(definition, tool_then_answer())

    tool_events = [e for e in events if isinstance(e, (ToolCallStart, ToolCallEnd))]
    assert tool_events[0] == ToolCallStart(tool="list_entity_types", call_id="call-1", input={})
    assert isinstance(tool_events[1], ToolCallEnd)
    assert tool_events[1].tool == "list_entity_types" and tool_events[1].call_id == "call-1"
    assert tool_events[1].output["types"][0] == {"type": "Person", "count": 2}
    assert tool_events[1].error is None
    assert events.index(tool_events[1]) < events.index(next(e for e in events if isinstance(e, TextDelta)))


async def test_streamcallback_receives_tool_call_error_and_the_run_goes_on(
    definition: AgentDefinition,
) -> None:
    provider = ScriptedProvider(
        turns=[[tool_call("list_entity_types", {"bogus": 1}, id="c1")], text("Sorry, that failed.")]
    )

    result, events = await run(definition, provider)

    end = next(e for e in events if isinstance(e, ToolCallEnd))
    assert end.error is not None and "bogus" in end.error
    assert result.status == "success"
    assert '"error"' in provider.calls[1].messages[-1].content
    assert result.tool_calls[0].error == end.error


async def test_streamcallback_receives_errors(definition: AgentDefinition) -> None:
    provider = ScriptedProvider(
        turns=[[TextDelta(text="par"), ErrorEvent(error="HTTP 500 from model server")]]
    )

    result, events = await run(definition, provider)

    assert events[-1] == RunError(message="HTTP 500 from model server", code="llm_error")
    assert (result.status, result.stop_reason, result.error_code) == ("error", "llm_error", "llm_error")
    run_row = await AgentRun.objects.aget(pk=result.run_id)
    assert (
        run_row.status == "error" and run_row.stop_reason == "llm_error" and run_row.completed_at is not None
    )


async def test_no_streamcallback_backward_compatible(definition: AgentDefinition) -> None:
    streamed, events = await run(definition, tool_then_answer())
    batch = await AgentExecutor().execute(
        ExecuteRequest(agent_definition=definition, message="Which types exist?", provider=tool_then_answer())
    )

    assert events
    assert (batch.status, batch.text, len(batch.tool_calls)) == (
        streamed.status,
        streamed.text,
        len(streamed.tool_calls),
    )
    assert [m.role for m in batch.messages] == [m.role for m in streamed.messages]


async def test_run_is_persisted_with_messages_tool_calls_and_usage(definition: AgentDefinition) -> None:
    result, _ = await run(definition, tool_then_answer())

    run_row = await AgentRun.objects.aget(pk=result.run_id)
    assert (run_row.status, run_row.stop_reason, run_row.step_count) == ("success", "completed", 2)
    assert (run_row.input_tokens, run_row.output_tokens) == (250, 15)
    assert run_row.final_text == "There are 2 types." and run_row.model == "scripted"
    assert run_row.worker and run_row.completed_at is not None
    messages = [m async for m in AgentRunMessage.objects.filter(run=run_row).order_by("created_at")]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    calls = [c async for c in AgentRunToolCall.objects.filter(run=run_row)]
    assert [(c.call_id, c.tool_name, c.input, c.error, c.step_number) for c in calls] == [
        ("call-1", "list_entity_types", {}, "", 1)
    ]
    assert calls[0].output["types"][1] == {"type": "Company", "count": 1}
    assert [m.role for m in result.messages] == ["assistant", "tool", "assistant"]
    assert result.messages[0].tool_calls[0].id == "call-1"
    assert result.messages[1].tool_calls[0].output == calls[0].output


async def test_max_steps_stops_the_run(definition: AgentDefinition) -> None:
    definition.max_steps = 2
    provider = ScriptedProvider(
        turns=[
            [tool_call("list_entity_types", {}, id="c0")],
            [TextDelta(text="thinking "), tool_call("list_entity_types", {}, id="c1")],
            text("never asked"),
        ]
    )

    result, events = await run(definition, provider)

    assert (result.status, result.stop_reason) == ("error", "max_steps")
    assert events[-1] == RunError(message="stopped after 2 steps (max_steps)", code="max_steps")
    assert len(provider.calls) == 2
    run_row = await AgentRun.objects.aget(pk=result.run_id)
    assert (run_row.status, run_row.stop_reason, run_row.step_count) == ("error", "max_steps", 2)


async def test_doom_loop_is_stopped(definition: AgentDefinition) -> None:
    definition.max_steps = 10
    provider = ScriptedProvider(turns=[[tool_call("list_entity_types", {}, id=f"c{i}")] for i in range(6)])

    result, events = await run(definition, provider)

    assert (result.status, result.stop_reason, result.error_code) == ("error", "doom_loop", "doom_loop")
    assert len(provider.calls) == 3
    assert isinstance(events[-1], RunError) and "doom loop" in events[-1].message
    assert result.tool_calls[-1].error is not None


async def run_stopped_at_its_first_text(
    definition: AgentDefinition, *reasons: StopReason
) -> tuple[Any, list[RunEvent]]:
    """A run whose model pauses after its first text; ``stop`` is called there with each reason."""
    stop = StopSignal()
    provider = ScriptedProvider(turns=[[TextDelta(text="slow "), Delay(5.0), TextDelta(text="never")]])
    events: list[RunEvent] = []

    def on_event(event: RunEvent) -> None:
        events.append(event)
        if isinstance(event, TextDelta):
            for reason in reasons or (CANCELLED,):
                stop.stop(reason)

    request = ExecuteRequest(
        agent_definition=definition, message="q", provider=provider, stop=stop, stream_callback=on_event
    )
    return await asyncio.wait_for(AgentExecutor().execute(request), timeout=3), events


async def test_cancellation_marks_the_run_cancelled(definition: AgentDefinition) -> None:
    result, events = await run_stopped_at_its_first_text(definition)

    assert (result.status, result.stop_reason, result.error_code) == ("cancelled", "cancelled", "cancelled")
    assert events[-1] == RunError(message="the run was cancelled", code="cancelled")
    assert (await AgentRun.objects.aget(pk=result.run_id)).status == "cancelled"


async def test_a_run_stopped_for_a_timeout_closes_once_as_error_with_the_reason_as_its_last_event(
    definition: AgentDefinition,
) -> None:
    timeout = StopReason(code="timeout", message="the turn took longer than 1 s and was stopped")

    # A cancel after the timeout does not change why the run stopped.
    result, events = await run_stopped_at_its_first_text(definition, timeout, CANCELLED)

    assert (result.status, result.stop_reason, result.error_code) == ("error", "timeout", "timeout")
    assert events[-1] == RunError(message=timeout.message, code="timeout")
    run = await AgentRun.objects.aget(pk=result.run_id)
    assert (run.status, run.stop_reason, run.error, run.final_text) == (
        "error",
        "timeout",
        timeout.message,
        "slow ",
    )


async def test_unservable_model_fails_the_run_cleanly(definition: AgentDefinition, settings: Any) -> None:
    settings.KGCHAT_MODEL = ""
    definition.model = {"name": "scripted/not-registered"}
    events: list[RunEvent] = []

    result = await AgentExecutor().execute(
        ExecuteRequest(agent_definition=definition, message="q", stream_callback=events.append)
    )

    assert (result.status, result.stop_reason) == ("error", "llm_error")
    assert isinstance(events[-1], RunError) and "not-registered" in events[-1].message
    assert (await AgentRun.objects.aget(pk=result.run_id)).status == "error"


async def test_prior_history_reaches_the_model_with_call_ids(definition: AgentDefinition) -> None:
    provider = ScriptedProvider(turns=[text("Still 2.")])
    history = [
        HistoryMessage(role="user", content="Which types?"),
        HistoryMessage(
            role="assistant", tool_calls=[HistoryToolCall(id="old-1", name="list_entity_types", input={})]
        ),
        HistoryMessage(
            role="tool",
            content='{"types": []}',
            tool_calls=[HistoryToolCall(id="old-1", name="list_entity_types", output={"types": []})],
        ),
        HistoryMessage(role="assistant", content="None yet."),
    ]

    result, _ = await run(definition, provider, history=history)

    sent = provider.calls[0].messages
    assert [m.role for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[2].tool_calls[0].id == "old-1" and sent[3].tool_call_id == "old-1"
    assert result.text == "Still 2."


async def test_history_limit_of_the_definition_is_applied(definition: AgentDefinition) -> None:
    definition.history_limit = 2
    provider = ScriptedProvider(turns=[text("ok")])
    history = [HistoryMessage(role="user" if i % 2 == 0 else "assistant", content=f"m{i}") for i in range(10)]

    await run(definition, provider, history=history)

    assert [m.content for m in provider.calls[0].messages[1:]] == ["m8", "m9", "Which types exist?"]


async def test_async_stream_callback_is_awaited(definition: AgentDefinition) -> None:
    seen: list[str] = []

    async def on_event(event: RunEvent) -> None:
        await asyncio.sleep(0)
        seen.append(event.type)

    await AgentExecutor().execute(
        ExecuteRequest(
            agent_definition=definition, message="q", provider=tool_then_answer(), stream_callback=on_event
        )
    )

    assert seen == ["tool_call_start", "tool_call_end", "text_delta", "text_delta"]


async def test_unknown_tool_call_is_a_tool_error_not_a_crash(definition: AgentDefinition) -> None:
    provider = ScriptedProvider(turns=[[tool_call("no_such_tool", {}, id="x1")], text("ok")])

    result, events = await run(definition, provider)

    assert result.status == "success"
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert ends and ends[0].error


async def test_unreachable_mcp_server_does_not_crash_the_run(
    definition: AgentDefinition, settings: Any
) -> None:
    settings.KGCHAT_MCP_URL_ALLOWLIST = ["127.0.0.1:9"]  # allowed, so the connection is really tried
    definition.mcp_servers = [{"name": "down", "url": "http://127.0.0.1:9/mcp", "tool_filter": ["x"]}]

    result, _ = await run(definition, tool_then_answer())

    assert result.status == "success"


async def test_sub_agents_are_built_from_definitions(definition: AgentDefinition) -> None:
    await sync_to_async(make_agent_definition)(
        definition.project, name="schema-helper", description="Knows the schema."
    )
    definition.sub_agents = ["schema-helper"]
    provider = tool_then_answer()

    await run(definition, provider)

    assert "transfer_to_agent" in [t.name for t in provider.calls[0].tools]


async def test_a_private_sub_agent_runs_only_in_the_turns_of_project_owners(
    definition: AgentDefinition,
) -> None:
    project = definition.project
    owner = await sync_to_async(lambda: project.memberships.get(role="owner").user)()
    viewer = await sync_to_async(make_user)()
    await sync_to_async(add_member)(project, viewer, "viewer")
    await sync_to_async(make_agent_definition)(
        project, name="owners-helper", description="Sees what owners see.", visibility="private"
    )
    definition.sub_agents = ["owners-helper"]
    for_viewer, for_owner = tool_then_answer(), tool_then_answer()

    await run(definition, for_viewer, writer_user_id=viewer.pk)
    await run(definition, for_owner, writer_user_id=owner.pk)

    assert "transfer_to_agent" not in [t.name for t in for_viewer.calls[0].tools]
    assert "transfer_to_agent" in [t.name for t in for_owner.calls[0].tools]


async def test_disabled_definition_does_not_run(definition: AgentDefinition) -> None:
    definition.disabled_reason = "an operator stopped it"
    provider = tool_then_answer()

    result, events = await run(definition, provider)

    assert (result.status, result.error_code) == ("error", "agent_definition_disabled")
    assert provider.calls == []
    assert [e.code for e in events if isinstance(e, RunError)] == ["agent_definition_disabled"]


async def test_a_model_that_calls_tools_only_under_a_schema_runs_the_small_model_loop_with_the_turns_project(
    definition: AgentDefinition, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[Any, Any]] = []
    stream = SmallModelTurn.stream

    def spy(self: SmallModelTurn, messages: Any, tools: Any, config: Any) -> Any:
        seen.append((self.project_id, self.graph_version))
        return stream(self, messages, tools, config)

    monkeypatch.setattr(SmallModelTurn, "stream", spy)
    with LLMTestServer() as server:
        server.enqueue(
            Json(completion(json.dumps({"name": "list_entity_types", "arguments": {}}))),
            Stream(text_chunks("There are 2 types.")),
        )
        provider = OpenAICompatProvider(
            base_url=server.base_url, model="small", max_retries=0, tool_calling="prompted"
        )

        result = await AgentExecutor().execute(
            ExecuteRequest(
                agent_definition=definition, message="Which types exist?", provider=provider, graph_version=7
            )
        )

    assert result.status == "success" and [c.tool for c in result.tool_calls] == ["list_entity_types"]
    assert seen and set(seen) == {(definition.project_id, 7)}

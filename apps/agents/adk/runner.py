"""One agent run through ADK: the ``LlmAgent`` built from a definition, the ``Runner``, the callbacks.

This is the only module that drives ADK's runner. ``adk_run`` takes the app's types (an
``AgentDefinition``, a ``Provider``, ``HistoryMessage``s, a ``StopSignal``) and gives back a
``RunState`` in the app's types (``events.py``): text, tool-call records, usage, steps, and why
it stopped. The executor turns that into the run's outcome and its audit rows.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import logging
import sys
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal

from django.conf import settings
from google.adk.agents import BaseAgent, LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.apps.app import App, ResumabilityConfig
from google.adk.events.event import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.telemetry import TelemetryConfig
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from opentelemetry import trace

from apps.agents.adk.model_adapter import ModelAdapter
from apps.agents.adk.session import RunSessionService
from apps.agents.adk.tools import GraphToolset, adk_name, graph_tools, mcp_toolsets
from apps.agents.approvals import WriteGate
from apps.agents.events import (
    ApprovalPending,
    RunEvent,
    RunResumed,
    StopSignal,
    StreamCallback,
    TextDelta,
    ToolCallEnd,
    ToolCallRecord,
    ToolCallStart,
    ToolResume,
)
from apps.agents.history import HistoryMessage
from apps.agents.llm.base import LLMError, Provider, Usage
from apps.agents.llm.resolve import effective_model_name, resolve_model
from apps.agents.models import AgentDefinition

logger = logging.getLogger(__name__)

APP_NAME = "kgchat"
# Every run is resumable: another process may continue it from its stored events (issue #27).
# ADK marks the config experimental (a warning per instance): one, built once, quietly.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    RESUMABLE = ResumabilityConfig(is_resumable=True)
DOOM_LOOP_REPEATS = 3

# What stopped a run from inside: the step limit, a repeated call (a doom loop), or a write tool
# call that waits for a member's approval (the run ends after that step; a later run continues).
LimitReason = Literal["max_steps", "doom_loop", "approval_required"]
INSIDE_STOPS = {"max_steps", "doom_loop", "approval_required"}


# ADK reads its telemetry settings (seven environment variables) into a new ``TelemetryConfig``
# for every model response of a run that has none; one config, read once, serves every run.
# With no OpenTelemetry tracer configured, nothing ADK puts on its spans is recorded, yet its
# experimental GenAI attributes convert every request's tool declarations and every response
# (~8 ms per model call); the stable conventions, which it then uses, build far less.
TELEMETRY = TelemetryConfig()
TELEMETRY_UNTRACED = TelemetryConfig(genai_semconv_stability_opt_in="stable")


def telemetry_config() -> TelemetryConfig:
    """The telemetry settings of a run: ADK's own when a tracer is configured, else the cheap ones."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return TELEMETRY_UNTRACED
    return TELEMETRY


# ADK imports its optional A2A agent inside every agent run (``build_node``) and catches the
# ImportError when the ``a2a`` package is missing; a failed import is not cached, so each run
# re-executed two modules (~1 ms). A ``None`` entry in ``sys.modules`` makes that import fail at
# once, as it would anyway.
if importlib.util.find_spec("a2a") is None:
    sys.modules.setdefault("google.adk.agents.remote_a2a_agent", None)  # type: ignore[arg-type]


@dataclass
class Failure:
    """Why a run failed: a message and a stable code (``llm_error``, ``agent_not_found``, …)."""

    message: str
    code: str


@dataclass
class RunState:
    """What one run has done so far; its methods are the ADK callbacks and the event handler.

    The text is collected from partial events or from the final event, never both.
    """

    callback: StreamCallback | None
    max_steps: int
    steps: int = 0
    text: list[str] = field(default_factory=list)
    partial_seen: bool = False
    usage: Usage = field(default_factory=Usage)
    stop_reason: LimitReason | None = None
    stop_message: str = ""
    error: Failure | None = None
    seen_calls: Counter[str] = field(default_factory=Counter)
    pending: dict[str, tuple[ToolCallRecord, float]] = field(default_factory=dict)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    messages: list[HistoryMessage] = field(default_factory=list)
    paused: ApprovalPending | None = None
    events_stored: int = 0

    async def restore(self, events: Sequence[Event], *, attempt: int) -> None:
        """Take up what earlier attempts of this run did (their stored events): the steps, the
        text of the model calls that finished, the tool calls that have a result; then tell the
        caller (``RunResumed``). A tool call with no stored result is run again by ADK."""
        calls: dict[str, ToolCallRecord] = {}
        steps_text: list[str] = []
        for event in events:
            if event.author == "user":
                continue
            if event.usage_metadata is not None:
                self.usage = Usage(
                    input_tokens=self.usage.input_tokens + (event.usage_metadata.prompt_token_count or 0),
                    output_tokens=self.usage.output_tokens
                    + (event.usage_metadata.candidates_token_count or 0),
                )
            function_calls = event.get_function_calls()
            responses = event.get_function_responses()
            parts = (event.content.parts if event.content else None) or []
            text = "".join(p.text for p in parts if p.text and not p.thought)
            if (text or function_calls) and not responses and not event.error_code:
                self.steps += 1
            if text and not responses:
                steps_text.append(text)
            for fc in function_calls:
                key = (fc.name or "") + json.dumps(dict(fc.args or {}), sort_keys=True, default=str)
                self.seen_calls[key] += 1
                calls[fc.id or f"call_{fc.name}"] = ToolCallRecord(
                    call_id=fc.id or f"call_{fc.name}",
                    tool=fc.name or "",
                    input=dict(fc.args or {}),
                    step=self.steps,
                )
            for fr in responses:
                record = calls.pop(fr.id or f"call_{fr.name}", None)
                if record is None:
                    continue
                record.output = fr.response
                if isinstance(fr.response, dict) and fr.response.get("error"):
                    record.error = str(fr.response["error"])
                self.tool_calls.append(record)
        self.text.extend(steps_text)
        await self.emit(
            RunResumed(text="".join(steps_text), tool_calls=list(self.tool_calls), attempt=attempt)
        )

    async def pause(self, pending: ApprovalPending) -> None:
        """A write call waits for approval: tell the caller, and call the model no more."""
        self.paused = pending
        if self.stop_reason is None:
            self.stop_reason = "approval_required"
            self.stop_message = "waiting for a member's approval of a graph change"
        await self.emit(pending)

    async def emit(self, event: RunEvent) -> None:
        if self.callback is None:
            return
        result = self.callback(event)
        if inspect.isawaitable(result):
            await result

    async def stream_text(self, text: str) -> None:
        """A text delta the model adapter streamed past ADK (``ModelAdapter.text_sink``): counts
        as a partial event's text, so the call's final response does not repeat it."""
        self.partial_seen = True
        self.text.append(text)
        await self.emit(TextDelta(text=text))

    # ADK callbacks --------------------------------------------------------------------------

    async def before_model(
        self, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        if self.stop_reason is None and self.steps >= self.max_steps:
            self.stop_reason = "max_steps"
            self.stop_message = f"stopped after {self.max_steps} steps (max_steps)"
        if self.stop_reason is not None:
            return LlmResponse(
                error_code=self.stop_reason, error_message=self.stop_message, turn_complete=True
            )
        self.steps += 1
        return None

    async def before_tool(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        call_id = tool_context.function_call_id or f"call_{tool.name}"
        record = ToolCallRecord(call_id=call_id, tool=tool.name, input=dict(args or {}), step=self.steps)
        self.pending[call_id] = (record, time.monotonic())
        await self.emit(ToolCallStart(tool=tool.name, call_id=call_id, input=record.input))
        key = tool.name + json.dumps(args or {}, sort_keys=True, default=str)
        self.seen_calls[key] += 1
        if self.seen_calls[key] >= DOOM_LOOP_REPEATS and self.stop_reason is None:
            self.stop_reason = "doom_loop"
            self.stop_message = f"stopped: {tool.name} was called {DOOM_LOOP_REPEATS} times with the same arguments (doom loop)"
            return {"error": self.stop_message}
        return None

    async def after_tool(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, tool_response: Any
    ) -> dict[str, Any] | None:
        await self._finish_tool(tool_context.function_call_id or f"call_{tool.name}", tool_response)
        return None

    async def on_tool_error(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, error: Exception
    ) -> dict[str, Any] | None:
        response = {"error": str(error) or type(error).__name__}
        # An unknown tool skips the after-tool callbacks, so the call is closed here.
        await self._finish_tool(tool_context.function_call_id or f"call_{tool.name}", response)
        return response

    async def _finish_tool(self, call_id: str, response: Any) -> None:
        pending = self.pending.pop(call_id, None)
        if pending is None:
            return
        record, started = pending
        record.duration_ms = int((time.monotonic() - started) * 1000)
        record.output = response
        if isinstance(response, dict) and response.get("error"):
            record.error = str(response["error"])
        self.tool_calls.append(record)
        await self.emit(ToolCallEnd(tool=record.tool, call_id=call_id, output=response, error=record.error))

    def close_pending(self) -> None:
        """Record the calls still running when the run ended as ``not completed``."""
        for record, started in self.pending.values():
            record.duration_ms = int((time.monotonic() - started) * 1000)
            record.error = record.error or "not completed"
            self.tool_calls.append(record)
        self.pending.clear()

    # runner events ----------------------------------------------------------------------------

    async def on_event(self, event: Event) -> None:
        if event.author == "user":
            return
        parts = (event.content.parts if event.content else None) or []
        text = "".join(p.text for p in parts if p.text and not p.thought)
        if event.partial:
            if text:
                self.partial_seen = True
                self.text.append(text)
                await self.emit(TextDelta(text=text))
            return
        if event.error_code:
            self.partial_seen = False
            if event.error_code not in INSIDE_STOPS and self.error is None:
                self.error = Failure(event.error_message or event.error_code, "llm_error")
            return
        if text and not event.get_function_responses():
            if not self.partial_seen:
                self.text.append(text)
                await self.emit(TextDelta(text=text))
        self.partial_seen = False
        if event.usage_metadata is not None:
            self.usage = Usage(
                input_tokens=self.usage.input_tokens + (event.usage_metadata.prompt_token_count or 0),
                output_tokens=self.usage.output_tokens + (event.usage_metadata.candidates_token_count or 0),
            )


def sub_provider(sub: AgentDefinition, fallback: Provider) -> Provider:
    """The provider of a sub-agent: its own model when it can be resolved, else the root agent's."""
    if effective_model_name(sub.model_choice.name) == fallback.name:
        return fallback
    try:
        return resolve_model(sub.model_choice.name)
    except LLMError:
        logger.warning("sub-agent %r cannot use its model; it shares the root agent's", sub.name)
        return fallback


def build_agent(
    definition: AgentDefinition,
    provider: Provider,
    state: RunState,
    *,
    project_id: uuid.UUID,
    sub_definitions: Sequence[AgentDefinition],
    share: bool = False,
    gate_for: Callable[[AgentDefinition], WriteGate] | None = None,
    graph_version: int | None = None,
) -> LlmAgent:
    """The ``LlmAgent`` of a definition, its tools, and its sub-agents (one level deep: no cycles).

    ``graph_version``: the project's, when known; a tool whose schema names the project's types
    reads them once per version."""
    adapter = ModelAdapter.for_provider(
        provider,
        temperature=definition.model_choice.temperature,
        coalesce_seconds=settings.KGCHAT_STREAM_COALESCE_MS / 1000,
        text_sink=state.stream_text,
    )
    prompt = definition.system_prompt or ""

    def instruction(_: ReadonlyContext) -> str:
        # A provider, not a template: braces in a prompt are text, never session-state lookups.
        return prompt

    gate = gate_for(definition) if gate_for is not None else None
    graph = graph_tools(list(definition.tools or []), project_id=project_id, gate=gate)
    tools: list[Any] = (
        [GraphToolset(graph, project_id=project_id, graph_version=graph_version)] if graph else []
    )
    tools += mcp_toolsets(list(definition.mcp_servers or []))
    subs: list[BaseAgent] = [
        build_agent(
            sub,
            provider if share else sub_provider(sub, provider),
            state,
            project_id=project_id,
            sub_definitions=[],
            gate_for=gate_for,
            graph_version=graph_version,
        )
        for sub in sub_definitions
    ]
    return LlmAgent(
        name=adk_name(definition.name),
        description=definition.description or "",
        model=adapter,
        instruction=instruction,
        tools=tools,
        sub_agents=subs,
        generate_content_config=types.GenerateContentConfig(temperature=adapter.temperature),
        before_model_callback=state.before_model,
        before_tool_callback=state.before_tool,
        after_tool_callback=state.after_tool,
        on_tool_error_callback=state.on_tool_error,
    )


async def adk_run(
    state: RunState,
    *,
    definition: AgentDefinition,
    provider: Provider,
    message: str,
    history: Sequence[HistoryMessage],
    project_id: uuid.UUID,
    sub_definitions: Sequence[AgentDefinition],
    run_id: uuid.UUID,
    user_id: str,
    stop: StopSignal | None,
    share_provider: bool,
    gate_for: Callable[[AgentDefinition], WriteGate] | None = None,
    resume: ToolResume | None = None,
    graph_version: int | None = None,
    attempt: int = 1,
    event_store: Any = None,
) -> None:
    """Run one turn of ``definition`` on ADK's runner, recording into ``state`` as it goes.

    The session is the run's, stored in ``kb.agent_run_events`` as it goes (``RunSessionService``):
    a new run's starts with ``history`` (the chat layer loaded it and stores the turn's messages
    itself). The messages the run adds are left in ``state.messages``, even when the run raises or
    is cancelled. With ``resume`` the new message is not ``message`` but the result of the tool
    call the history ends with (a decided approval), so the model carries on from there.

    ``attempt`` > 1: the run's process died, and this one resumes it with ADK's resumption from
    its stored events: no new message; a model step that finished is not called again, a stored
    tool result is not fetched again, a call recorded but never answered is run. ``event_store``
    replaces ``apps.agents.services`` as where the events go (tests of a run without a row).
    """
    agent = build_agent(
        definition,
        provider,
        state,
        project_id=project_id,
        sub_definitions=sub_definitions,
        share=share_provider,
        gate_for=gate_for,
        graph_version=graph_version,
    )
    resuming = attempt > 1
    session_id = str(run_id)
    service = RunSessionService(
        run_id=run_id,
        seed=history,
        resume=resuming,
        agent_name=agent.name,
        history_limit=definition.history_limit,
        token_budget=definition.token_budget,
        store=event_store,
    )
    app = App(name=APP_NAME, root_agent=agent, resumability_config=RESUMABLE)
    runner = Runner(app=app, session_service=service)
    run_config = RunConfig(
        streaming_mode=StreamingMode.SSE, max_llm_calls=state.max_steps * 4 + 10, telemetry=telemetry_config()
    )
    content: types.Content | None
    invocation_id: str | None = None
    if resuming:
        await service.get_session(app_name=APP_NAME, user_id=user_id, session_id=session_id)
        invocation_id = next((e.invocation_id for e in reversed(service.own_events) if e.invocation_id), None)
        await state.restore(service.own_events, attempt=attempt)
        content = None
        if invocation_id is None:  # died before its first event was stored: start it again
            content = _first_message(message, resume)
    else:
        content = _first_message(message, resume)
    try:
        async with aclosing(
            runner.run_async(
                user_id=user_id,
                session_id=session_id,
                new_message=content,
                invocation_id=invocation_id,
                run_config=run_config,
                abort_signal=stop.event if stop is not None else None,
            )
        ) as events:
            async for event in events:
                await state.on_event(event)
    finally:
        state.messages = list(service.appended.get(session_id, []))
        state.events_stored = service.stored
        try:
            await runner.close()
        except Exception:
            logger.warning("closing the ADK runner of session %s failed", session_id, exc_info=True)


def _first_message(message: str, resume: ToolResume | None) -> types.Content:
    """The new message of a run: the user's, or the decided call's result (``resume``)."""
    if resume is not None:
        response = types.FunctionResponse(id=resume.call_id, name=resume.tool, response=resume.result)
        return types.Content(role="user", parts=[types.Part(function_response=response)])
    return types.Content(role="user", parts=[types.Part(text=message)])

"""One agent run through ADK: the ``LlmAgent`` built from a definition, the ``Runner``, the callbacks.

This is the only module that drives ADK's runner. ``adk_run`` takes the app's types (an
``AgentDefinition``, a ``Provider``, ``HistoryMessage``s, a ``StopSignal``) and gives back a
``RunState`` in the app's types (``events.py``): text, tool-call records, usage, steps, and why
it stopped. The executor turns that into the run's outcome and its audit rows.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import aclosing, contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from google.adk.agents import BaseAgent, LlmAgent
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.apps.app import App, ResumabilityConfig
from google.adk.events.event import Event
from google.adk.runners import Runner
from google.adk.telemetry import TelemetryConfig
from google.genai import types
from opentelemetry import trace

from apps.agents.adk.model_adapter import ModelAdapter
from apps.agents.adk.run_state import RunState
from apps.agents.adk.session import RunSessionService
from apps.agents.adk.tools import GraphToolset, adk_name, graph_tools, mcp_toolsets
from apps.agents.approvals import WriteGate
from apps.agents.events import (
    StopSignal,
    ToolResume,
)
from apps.agents.history import HistoryMessage
from apps.agents.llm.base import LLMError, Provider
from apps.agents.llm.resolve import effective_model_name, resolve_model
from apps.agents.models import AgentDefinition
from apps.core.errors import ServiceError

logger = logging.getLogger(__name__)

APP_NAME = "kgchat"


class AgentNotFound(ServiceError):
    """The model handed the turn to an agent that is not one of this agent's sub-agents."""

    status = 502
    code = "agent_not_found"


# How ADK says so (a ``ValueError``: "Transfer target agent 'x' not found.", "Agent 'x' not
# found."; tests/agents/test_batch.py makes a model name a sub-agent that does not exist).
_ADK_AGENT_NOT_FOUND = re.compile(r"agent '?([\w.-]+)'? not found", re.IGNORECASE)


@contextmanager
def _agent_not_found_named() -> Iterator[None]:
    """ADK's missing agent, as ``AgentNotFound`` (the rest of the code does not read ADK's words)."""
    try:
        yield
    except ValueError as exc:
        found = _ADK_AGENT_NOT_FOUND.search(str(exc))
        if found is None:
            raise
        raise AgentNotFound(f"failed to find agent: {found.group(1)}") from exc


# Every run is resumable: another process may continue it from its stored events (issue #27).
# ADK marks the config experimental (a warning per instance): one, built once, quietly.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    RESUMABLE = ResumabilityConfig(is_resumable=True)


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


def sub_provider(sub: AgentDefinition, fallback: Provider) -> Provider:
    """The provider of a sub-agent: its own model when it can be resolved, else the root agent's."""
    if effective_model_name(sub.model_choice.name) == fallback.name:
        return fallback
    try:
        return resolve_model(sub.model_choice.name)
    except LLMError:
        logger.warning("sub-agent %r cannot use its model; it shares the root agent's", sub.name)
        return fallback


def _sub_steps(
    sub: AgentDefinition, root: Provider, steps_for: Callable[[Provider], Provider] | None
) -> Provider:
    """The steps a sub-agent's turn runs on: the root agent's when it has the same model, else its
    own model's, as the executor runs a turn on it (``steps_for``)."""
    own = sub_provider(sub, root)
    if own is root or steps_for is None:
        return own
    return steps_for(own)


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
    available: Mapping[str, bool] | None = None,
    steps_for: Callable[[Provider], Provider] | None = None,
) -> LlmAgent:
    """The ``LlmAgent`` of a definition, its tools, and its sub-agents (one level deep: no cycles).

    ``graph_version``: the project's, when known; a tool whose schema names the project's types
    reads them once per version. ``available``: what the tools' availability checks said in the
    project, when the caller read them (by tool name); the others are read once a run.
    ``steps_for``: how a turn runs on a sub-agent's own model (the executor's choice, e.g. the
    small-model loop over it); ``provider`` is the root agent's already."""
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
        [GraphToolset(graph, project_id=project_id, graph_version=graph_version, available=available)]
        if graph
        else []
    )
    tools += mcp_toolsets(list(definition.mcp_servers or []))
    subs: list[BaseAgent] = [
        build_agent(
            sub,
            provider if share else _sub_steps(sub, provider, steps_for),
            state,
            project_id=project_id,
            sub_definitions=[],
            gate_for=gate_for,
            graph_version=graph_version,
            available=available,
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
    available: Mapping[str, bool] | None = None,
    steps_for: Callable[[Provider], Provider] | None = None,
) -> None:
    """Run one turn of ``definition`` on ADK's runner, recording into ``state`` as it goes: the
    agent (``build_agent``), its session (``_session``), where it starts (``_start``), the run.

    The session is the run's, stored in ``kb.agent_run_events`` as it goes (``RunSessionService``):
    a new run's starts with ``history`` (the chat layer loaded it and stores the turn's messages
    itself). The messages the run adds are left in ``state.messages``, even when the run raises or
    is cancelled. With ``resume`` the new message is not ``message`` but the result of the tool
    call the history ends with (a decided approval), so the model carries on from there.

    ``attempt`` > 1: the run's process died, and this one resumes it with ADK's resumption from
    its stored events: no new message; a model step that finished is not called again, a stored
    tool result is not fetched again, a call recorded but never answered is run. ``event_store``
    replaces ``apps.agents.services`` as where the events go (tests of a run without a row);
    ``available``: the tools' availability in the project, when the caller read it (``build_agent``);
    ``provider`` is what the root agent's steps run on, ``steps_for`` what a sub-agent's own model's
    do (both the executor's choice).
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
        available=available,
        steps_for=steps_for,
    )
    service = _session(definition, agent, history, run_id=run_id, attempt=attempt, store=event_store)
    start = await _start(
        service, state, user_id=user_id, attempt=attempt, first=_first_message(message, resume)
    )
    if start.answered:
        # It died after storing its answer: that answer (restored) is the run's; ADK would ask
        # the model again and the answer would stream twice.
        _keep(state, service)
    else:
        await _run(agent, service, state, start, user_id=user_id, stop=stop)


@dataclass(frozen=True)
class Start:
    """Where a run starts: its new message (none when a stored invocation goes on), that
    invocation's id, and whether its stored events already end with its answer."""

    content: types.Content | None
    invocation_id: str | None = None
    answered: bool = False


async def _start(
    service: RunSessionService, state: RunState, *, user_id: str, attempt: int, first: types.Content
) -> Start:
    """A new run starts from ``first``; a resumed one from its resume point (``_resume_point``)."""
    if attempt <= 1:
        return Start(first)
    content, invocation_id = await _resume_point(service, state, user_id, attempt, first)
    return Start(content, invocation_id, answered=_answered(service.own_events))


async def _run(
    agent: LlmAgent,
    service: RunSessionService,
    state: RunState,
    start: Start,
    *,
    user_id: str,
    stop: StopSignal | None,
) -> None:
    """ADK's ``Runner`` over the run's session from ``start``, each event recorded into ``state``;
    the messages the run added are kept in ``state`` however it ends."""
    app = App(name=APP_NAME, root_agent=agent, resumability_config=RESUMABLE)
    runner = Runner(app=app, session_service=service)
    run_config = RunConfig(
        streaming_mode=StreamingMode.SSE, max_llm_calls=state.max_steps * 4 + 10, telemetry=telemetry_config()
    )
    try:
        async with aclosing(
            runner.run_async(
                user_id=user_id,
                session_id=str(service.run_id),
                new_message=start.content,
                invocation_id=start.invocation_id,
                run_config=run_config,
                abort_signal=stop.event if stop is not None else None,
            )
        ) as events:
            with _agent_not_found_named():
                async for event in events:
                    await state.on_event(event)
    finally:
        _keep(state, service)
        try:
            await runner.close()
        except Exception:
            logger.warning("closing the ADK runner of session %s failed", service.run_id, exc_info=True)


def _keep(state: RunState, service: RunSessionService) -> None:
    """Leave in ``state`` the messages the run added to its session and the events it stored."""
    state.messages = list(service.appended.get(str(service.run_id), []))
    state.events_stored = service.stored


def _session(
    definition: AgentDefinition,
    agent: BaseAgent,
    history: Sequence[HistoryMessage],
    *,
    run_id: uuid.UUID,
    attempt: int,
    store: Any,
) -> RunSessionService:
    """The run's session, stored in ``kb.agent_run_events`` (a new run's starts with ``history``)."""
    return RunSessionService(
        run_id=run_id,
        seed=history,
        resume=attempt > 1,
        agent_name=agent.name,
        history_limit=definition.history_limit,
        token_budget=definition.token_budget,
        store=store,
    )


async def _resume_point(
    service: RunSessionService, state: RunState, user_id: str, attempt: int, first: types.Content
) -> tuple[types.Content | None, str | None]:
    """Where a resumed run goes on: its stored invocation with no new message, or (it died before
    its first event was stored) its first message again; ``state`` restored from the stored events."""
    await service.get_session(app_name=APP_NAME, user_id=user_id, session_id=str(service.run_id))
    invocation_id = next((e.invocation_id for e in reversed(service.own_events) if e.invocation_id), None)
    await state.restore(service.own_events, attempt=attempt)
    return (None, invocation_id) if invocation_id is not None else (first, None)


async def run_state_restore(state: RunState, *, run_id: uuid.UUID, attempt: int) -> None:
    """Restore into ``state`` what a run's earlier attempts did (its stored events), as a resumed
    run does before it goes on, and its messages: for a run that ends without going on."""
    service = RunSessionService(run_id=run_id, resume=True)
    await _resume_point(service, state, "", attempt, _first_message("", None))
    _keep(state, service)


def _answered(events: Sequence[Event]) -> bool:
    """Whether a run's stored events end with its answer: the agent's end, or a model response
    with text and no tool call (the final response, before ADK stored the agent's end)."""
    last = next((e for e in reversed(events) if e.author != "user"), None)
    if last is None or last.partial or last.error_code:
        return False
    if last.actions is not None and last.actions.end_of_agent:
        return True
    parts = (last.content.parts if last.content else None) or []
    has_text = any(p.text and not p.thought for p in parts)
    return has_text and not last.get_function_calls() and not last.get_function_responses()


def _first_message(message: str, resume: ToolResume | None) -> types.Content:
    """The new message of a run: the user's, or the decided call's result (``resume``)."""
    if resume is not None:
        response = types.FunctionResponse(id=resume.call_id, name=resume.tool, response=resume.result)
        return types.Content(role="user", parts=[types.Part(function_response=response)])
    return types.Content(role="user", parts=[types.Part(text=message)])

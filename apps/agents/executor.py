"""The agent executor: one agent turn through ADK, streamed to an optional callback, audited.

``AgentExecutor.execute(ExecuteRequest) -> ExecuteResult`` builds an ADK ``LlmAgent`` from an
``AgentDefinition`` (system prompt, model via ``resolve_model`` and ``ModelAdapter``, temperature,
graph tools restricted to the definition's list, MCP toolsets, sub-agents), runs it with SSE
streaming and calls ``stream_callback`` (sync or async) with ``TextDelta``, ``ToolCallStart``,
``ToolCallEnd`` and ``Error``. Without a callback it is batch mode: same run, no events.

It enforces ``max_steps`` (one step = one model call), stops doom loops (the same tool with the
same arguments ``DOOM_LOOP_REPEATS`` times), turns tool failures into ``{"error": …}`` results the
model sees, and always closes the ``kb.agent_runs`` row: success, error, or cancelled.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from django.conf import settings
from google.adk.agents import BaseAgent, LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.events.event import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import BaseModel, Field

from apps.agents.adk.model_adapter import ModelAdapter
from apps.agents.adk.session import HistorySessionService
from apps.agents.adk.tools import adk_name, graph_tools, mcp_toolsets
from apps.agents.history import HistoryMessage, InMemoryHistoryStore
from apps.agents.llm.base import LLMError, Provider, Usage
from apps.agents.llm.resolve import effective_model_name, resolve_model
from apps.agents.models import AgentDefinition, RunStatus
from apps.agents.selectors import agent_definition_check_enabled, agent_definitions_by_names
from apps.agents.services import agent_run_finish, agent_run_start
from apps.projects.errors import ServiceError

logger = logging.getLogger(__name__)

APP_NAME = "kgchat"
DOOM_LOOP_REPEATS = 3


# --- the events a stream callback receives ---------------------------------------------------


class TextDelta(BaseModel):
    type: Literal["text_delta"] = "text_delta"
    text: str


class ToolCallStart(BaseModel):
    type: Literal["tool_call_start"] = "tool_call_start"
    tool: str
    call_id: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolCallEnd(BaseModel):
    type: Literal["tool_call_end"] = "tool_call_end"
    tool: str
    call_id: str
    output: Any = None
    error: str | None = None


class Error(BaseModel):
    type: Literal["error"] = "error"
    message: str
    code: str


StreamEvent = TextDelta | ToolCallStart | ToolCallEnd | Error
StreamCallback = Callable[[StreamEvent], Awaitable[None] | None]


# --- request and result ----------------------------------------------------------------------


@dataclass
class ExecuteRequest:
    """One agent turn.

    ``history`` is the conversation before ``message`` (oldest first; the executor applies the
    definition's ``history_limit`` and ``token_budget``). ``provider`` replaces ``resolve_model``
    (tests). Setting ``cancel`` stops the run with status ``cancelled``.
    """

    agent_definition: AgentDefinition
    message: str
    project_id: uuid.UUID | None = None
    history: Sequence[HistoryMessage] = ()
    conversation_id: uuid.UUID | None = None
    user_id: str = "user"
    stream_callback: StreamCallback | None = None
    provider: Provider | None = None
    cancel: asyncio.Event | None = None
    sub_agent_definitions: list[AgentDefinition] | None = None
    # The id the run row gets, when the caller must announce it before the run starts.
    run_id: uuid.UUID | None = None


class ToolCallRecord(BaseModel):
    call_id: str
    tool: str
    input: dict[str, Any] = Field(default_factory=dict)
    output: Any = None
    error: str | None = None
    duration_ms: int = 0
    step: int = 0


class ExecuteResult(BaseModel):
    """The outcome. ``messages`` are the new messages after the user's (assistant with tool calls,
    tool results, final assistant), ready for ``kb.chat_messages``; ``text`` is all streamed text."""

    run_id: uuid.UUID
    status: str
    stop_reason: str
    text: str = ""
    error: str | None = None
    error_code: str | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    messages: list[HistoryMessage] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    steps: int = 0


_AGENT_NOT_FOUND = re.compile(r"agent '?([\w.-]+)'? not found", re.IGNORECASE)


def describe_failure(exc: BaseException) -> tuple[str, str]:
    """(message, code) for an exception that ended a run."""
    if isinstance(exc, LLMError):
        return str(exc), "llm_error"
    if isinstance(exc, ServiceError):
        return exc.message, exc.code
    text = str(exc)
    match = _AGENT_NOT_FOUND.search(text)
    if match:
        return f"failed to find agent: {match.group(1)}", "agent_not_found"
    return f"{type(exc).__name__}: {text}", "internal_error"


@dataclass
class RunState:
    callback: StreamCallback | None
    max_steps: int
    steps: int = 0
    text: list[str] = field(default_factory=list)
    partial_seen: bool = False
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    stop_message: str = ""
    error: tuple[str, str] | None = None
    seen_calls: Counter[str] = field(default_factory=Counter)
    pending: dict[str, tuple[ToolCallRecord, float]] = field(default_factory=dict)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)

    async def emit(self, event: StreamEvent) -> None:
        if self.callback is None:
            return
        result = self.callback(event)
        if inspect.isawaitable(result):
            await result

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
            if event.error_code not in {"max_steps", "doom_loop"} and self.error is None:
                self.error = (event.error_message or event.error_code, "llm_error")
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


class AgentExecutor:
    """Runs agent turns. Stateless: one instance may serve many concurrent turns."""

    async def execute(self, request: ExecuteRequest) -> ExecuteResult:
        definition = request.agent_definition
        project_id = request.project_id or definition.project_id
        model_name = str((definition.model or {}).get("name") or "")
        run = await agent_run_start(
            project_id=project_id,
            agent_definition_id=definition.pk,
            conversation_id=request.conversation_id,
            model=request.provider.name if request.provider else effective_model_name(model_name),
            run_id=request.run_id,
        )
        state = RunState(callback=request.stream_callback, max_steps=max(1, definition.max_steps))
        service: HistorySessionService | None = None
        runner: Runner | None = None
        model = run.model
        session_id = str(request.conversation_id or run.id)
        cancelled = False
        try:
            agent_definition_check_enabled(definition)
            provider = request.provider or resolve_model(model_name)
            model = provider.name
            subs = request.sub_agent_definitions
            if subs is None:
                subs = await agent_definitions_by_names(
                    project_id=project_id, names=list(definition.sub_agents or [])
                )
            agent = self._build_agent(
                definition,
                provider,
                state,
                project_id=project_id,
                sub_definitions=subs,
                share=request.provider is not None,
            )
            service = HistorySessionService(
                InMemoryHistoryStore({session_id: request.history}),
                agent_name=agent.name,
                history_limit=definition.history_limit,
                token_budget=definition.token_budget,
            )
            runner = Runner(agent=agent, app_name=APP_NAME, session_service=service)
            run_config = RunConfig(streaming_mode=StreamingMode.SSE, max_llm_calls=state.max_steps * 4 + 10)
            message = types.Content(role="user", parts=[types.Part(text=request.message)])
            async with aclosing(
                runner.run_async(
                    user_id=request.user_id,
                    session_id=session_id,
                    new_message=message,
                    run_config=run_config,
                    abort_signal=request.cancel,
                )
            ) as events:
                async for event in events:
                    await state.on_event(event)
            cancelled = request.cancel is not None and request.cancel.is_set()
        except asyncio.CancelledError:
            cancelled = True
            raise
        except Exception as exc:
            logger.info("agent run %s failed: %s", run.id, exc, exc_info=not isinstance(exc, LLMError))
            state.error = describe_failure(exc)
        finally:
            result = await asyncio.shield(
                self._finish(run, state, service, session_id, model, cancelled, runner)
            )
        return result

    def _build_agent(
        self,
        definition: AgentDefinition,
        provider: Provider,
        state: RunState,
        *,
        project_id: uuid.UUID,
        sub_definitions: list[AgentDefinition],
        share: bool = False,
    ) -> LlmAgent:
        temperature = (definition.model or {}).get("temperature")
        adapter = ModelAdapter.for_provider(
            provider,
            temperature=float(temperature) if temperature is not None else None,
            coalesce_seconds=settings.KGCHAT_STREAM_COALESCE_MS / 1000,
        )
        prompt = definition.system_prompt or ""

        def instruction(_: ReadonlyContext) -> str:
            # A provider, not a template: braces in a prompt are text, never session-state lookups.
            return prompt

        tools: list[Any] = [*graph_tools(list(definition.tools or []), project_id=project_id)]
        tools += mcp_toolsets(list(definition.mcp_servers or []))
        # Sub-agents are one level deep (their own sub_agents are not followed: no cycles).
        subs: list[BaseAgent] = [
            self._build_agent(
                sub,
                provider if share else _sub_provider(sub, provider),
                state,
                project_id=project_id,
                sub_definitions=[],
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

    async def _finish(
        self,
        run: Any,
        state: RunState,
        service: HistorySessionService | None,
        session_id: str,
        model: str,
        cancelled: bool,
        runner: Runner | None,
    ) -> ExecuteResult:
        if runner is not None:
            try:
                await runner.close()
            except Exception:
                logger.warning("closing the runner of run %s failed", run.id, exc_info=True)
        for record, started in state.pending.values():
            record.duration_ms = int((time.monotonic() - started) * 1000)
            record.error = record.error or "not completed"
            state.tool_calls.append(record)
        state.pending.clear()
        if cancelled:
            status, stop_reason, error = (
                RunStatus.CANCELLED,
                "cancelled",
                ("the run was cancelled", "cancelled"),
            )
        elif state.stop_reason is not None:
            status, stop_reason, error = (
                RunStatus.ERROR,
                state.stop_reason,
                (state.stop_message, state.stop_reason),
            )
        elif state.error is not None:
            code = state.error[1]
            status, stop_reason, error = RunStatus.ERROR, code, state.error
        else:
            status, stop_reason, error = RunStatus.SUCCESS, "completed", None
        if error is not None:
            try:
                await state.emit(Error(message=error[0], code=error[1]))
            except Exception:
                logger.warning(
                    "the stream callback failed on the error event of run %s", run.id, exc_info=True
                )
        appended = service.appended.get(session_id, []) if service else []
        new_messages = [m for m in appended if m.role != "user"]
        text = "".join(state.text)
        step_of: dict[str, int] = {r.call_id: r.step for r in state.tool_calls}
        trace: list[dict[str, Any]] = []
        step = 0
        for m in appended:
            if m.role == "assistant":
                step += 1
            calls = [c.model_dump(mode="json") for c in m.tool_calls]
            number = step_of.get(m.tool_calls[0].id, step) if m.tool_calls and m.role == "tool" else step
            trace.append({"step_number": number, "role": m.role, "content": m.content, "tool_calls": calls})
        await agent_run_finish(
            run=run,
            status=status,
            stop_reason=stop_reason,
            error=error[0] if error else "",
            model=model,
            step_count=state.steps,
            input_tokens=state.usage.input_tokens,
            output_tokens=state.usage.output_tokens,
            final_text=text,
            messages=trace,
            tool_calls=[
                {
                    "call_id": r.call_id[:200],
                    "tool_name": r.tool[:200],
                    "input": r.input,
                    "output": _jsonable(r.output),
                    "error": r.error or "",
                    "duration_ms": r.duration_ms,
                    "step_number": r.step,
                }
                for r in state.tool_calls
            ],
        )
        return ExecuteResult(
            run_id=run.id,
            status=status,
            stop_reason=stop_reason,
            text=text,
            error=error[0] if error else None,
            error_code=error[1] if error else None,
            tool_calls=list(state.tool_calls),
            messages=new_messages,
            usage=state.usage,
            model=model,
            steps=state.steps,
        )


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str)) if value is not None else None


def _sub_provider(sub: AgentDefinition, fallback: Provider) -> Provider:
    if effective_model_name(str((sub.model or {}).get("name") or "")) == fallback.name:
        return fallback
    try:
        return resolve_model(str((sub.model or {}).get("name") or ""))
    except LLMError:
        logger.warning("sub-agent %r cannot use its model; it shares the root agent's", sub.name)
        return fallback


# --- batch use ---------------------------------------------------------------------------------

_FAILED_TO_FIND_AGENT = re.compile(r"failed to find agent: ([\w.-]+)")
CORRECTION_MESSAGE = (
    '[System: Agent "{name}" does not exist. Valid agents: {valid}. '
    "Please retry using one of the valid agent names listed above.]"
)


async def run_and_collect(request: ExecuteRequest, *, executor: AgentExecutor | None = None) -> ExecuteResult:
    """Run a turn for a batch caller; retry once when the model named a sub-agent that does not exist.

    The text is collected from partial events or the final event, never both (see ``RunState``).
    On ``failed to find agent: <name>`` with sub-agents registered, the correction message is sent
    as the next user message (after the failed attempt's messages) and the run is retried exactly
    once; its result, success or error, is returned. Any other error is returned at once.
    """
    executor = executor or AgentExecutor()
    result = await executor.execute(request)
    match = _FAILED_TO_FIND_AGENT.search(result.error or "") if result.status == RunStatus.ERROR else None
    if match is None:
        return result
    definition = request.agent_definition
    subs = request.sub_agent_definitions
    if subs is None:
        subs = await agent_definitions_by_names(
            project_id=request.project_id or definition.project_id, names=list(definition.sub_agents or [])
        )
    if not subs:
        return result
    correction = CORRECTION_MESSAGE.format(
        name=match.group(1), valid=", ".join(adk_name(d.name) for d in subs)
    )
    history = [*request.history, HistoryMessage(role="user", content=request.message), *result.messages]
    retry = replace(request, message=correction, history=history, sub_agent_definitions=subs)
    return await executor.execute(retry)


async def agent_question_answer(*, project_ref: str, agent_name: str, question: str) -> ExecuteResult:
    """Ask one agent of a project one question, in batch mode (the ``run_agent`` command)."""
    from asgiref.sync import sync_to_async

    from apps.agents.selectors import agent_definition_by_name
    from apps.projects.selectors import project_get_by_ref

    project = await sync_to_async(project_get_by_ref)(project_ref=project_ref)
    definition = await sync_to_async(agent_definition_by_name)(project=project, name=agent_name)
    return await run_and_collect(
        ExecuteRequest(agent_definition=definition, message=question, project_id=project.id)
    )

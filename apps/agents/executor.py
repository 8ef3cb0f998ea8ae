"""The agent executor: one agent turn, streamed to an optional callback, audited once.

``AgentExecutor.execute(ExecuteRequest) -> ExecuteResult`` opens the ``kb.agent_runs`` row,
runs the definition through ADK (``apps/agents/adk/runner.py``: system prompt, model, graph
tools, MCP toolsets, sub-agents, ``max_steps``, doom-loop detection) and closes the row exactly
once with the outcome: success, error (a failure, a limit, a timeout) or cancelled. The optional
``stream_callback`` (sync or async) receives the app's events (``apps/agents/events.py``):
``TextDelta``, ``ToolCallStart``, ``ToolCallEnd`` and ``RunError``. Without one it is batch mode.

How the turn's steps run is chosen here (``loop.turn.turn_steps``): a model that calls tools only
under a JSON Schema gets the small-model loop over its provider, given the turn's project and
graph version; any other model runs its steps itself.

Why a run is stopped from outside (a user's cancel, a timeout, a deleted conversation) comes in
as the ``StopSignal`` of the request; the executor reports it as the run's last event and status.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from apps.agents.adk.run_state import Failure, RunState
from apps.agents.adk.runner import adk_run, run_state_restore
from apps.agents.approvals import WriteGate
from apps.agents.events import (
    CANCELLED,
    ERROR_STOPS,
    ApprovalPending,
    RunError,
    StopSignal,
    StreamCallback,
    ToolCallRecord,
    ToolResume,
    TraceMessage,
)
from apps.agents.history import HistoryMessage
from apps.agents.llm.base import Provider, Usage
from apps.agents.llm.resolve import effective_model_name, resolve_model
from apps.agents.loop.turn import turn_steps
from apps.agents.models import AgentDefinition, AgentRun, RunStatus
from apps.agents.selectors import agent_definition_check_enabled, agent_definitions_by_names
from apps.agents.services import agent_run_finish, agent_run_start
from apps.agents.tool_results import as_the_model_saw
from apps.core.failures import error_classify

logger = logging.getLogger(__name__)


@dataclass
class ExecuteRequest:
    """One agent turn.

    ``history`` is the conversation before ``message`` (oldest first; the executor applies the
    definition's ``history_limit`` and ``token_budget``). ``provider`` replaces ``resolve_model``
    (tests). Setting ``stop`` stops the run, with the reason it carries.
    """

    agent_definition: AgentDefinition
    message: str
    project_id: uuid.UUID | None = None
    history: Sequence[HistoryMessage] = ()
    conversation_id: uuid.UUID | None = None
    user_id: str = "user"
    stream_callback: StreamCallback | None = None
    provider: Provider | None = None
    stop: StopSignal | None = None
    sub_agent_definitions: list[AgentDefinition] | None = None
    # The id the run row gets, when the caller must announce it before the run starts.
    run_id: uuid.UUID | None = None
    # The run row, when the caller opened it already (``agent_run_open``); else the executor does.
    run: AgentRun | None = None
    # The user whose turn it is: their role decides whether a write tool call runs (tool policy
    # "never") or waits for approval. None: write tools answer approval_required, as before.
    writer_user_id: int | None = None
    # The project's graph version the turn reads (stored on the run).
    graph_version: int | None = None
    # What the graph tools' availability checks said in the project, when the caller read them
    # (a chat turn, with its admission), by tool name; None: the run reads them.
    tools_available: dict[str, bool] | None = None
    # Continue after a decided approval: the history ends with that call, this is its result.
    resume: ToolResume | None = None
    # Which attempt at the run this is: > 1 when another process ran it and died; the run then
    # resumes from its stored events (``adk_run``) instead of starting from ``message``.
    attempt: int = 1


class ExecuteResult(BaseModel):
    """The outcome. ``messages`` are the new messages after the user's (assistant with tool calls,
    tool results as the model was given them, final assistant), ready for ``kb.chat_messages``;
    ``tool_calls`` hold the whole results (the audit trail's); ``text`` is all streamed text."""

    run_id: uuid.UUID
    status: RunStatus
    stop_reason: str
    text: str = ""
    error: str | None = None
    error_code: str | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    messages: list[HistoryMessage] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    steps: int = 0
    # Set when the run stopped because a write tool call waits for approval.
    approval: ApprovalPending | None = None


@dataclass
class Outcome:
    status: RunStatus
    stop_reason: str
    error: Failure | None = None


class AgentExecutor:
    """Runs agent turns. Stateless: one instance may serve many concurrent turns."""

    async def execute(self, request: ExecuteRequest) -> ExecuteResult:
        definition = request.agent_definition
        project_id = request.project_id or definition.project_id
        run = request.run or await agent_run_start(
            project_id=project_id,
            agent_definition_id=definition.pk,
            conversation_id=request.conversation_id,
            model=request.provider.name
            if request.provider
            else effective_model_name(definition.model_choice.name),
            run_id=request.run_id,
            graph_version=request.graph_version,
        )
        if request.attempt > 1 and request.stop is not None and request.stop.is_set():
            # Its process died and it was stopped meanwhile (a cancel, too many attempts).
            return await self.end(
                run, request.stop, callback=request.stream_callback, attempt=request.attempt
            )
        state = RunState(callback=request.stream_callback, max_steps=max(1, definition.max_steps))
        model = run.model
        stopped = False
        try:
            agent_definition_check_enabled(definition)
            steps = functools.partial(turn_steps, project_id=project_id, graph_version=request.graph_version)
            provider = steps(request.provider or resolve_model(definition.model_choice.name))
            model = provider.name
            subs = request.sub_agent_definitions
            if subs is None:
                subs = await agent_definitions_by_names(
                    project_id=project_id,
                    names=list(definition.sub_agents or []),
                    user_id=request.writer_user_id,
                )
            gate_for = _gates(request, project_id=project_id, run_id=run.id, state=state)
            await adk_run(
                state,
                definition=definition,
                provider=provider,
                message=request.message,
                history=request.history,
                project_id=project_id,
                sub_definitions=subs,
                run_id=run.id,
                user_id=request.user_id,
                stop=request.stop,
                share_provider=request.provider is not None,
                gate_for=gate_for,
                resume=request.resume,
                graph_version=request.graph_version,
                attempt=request.attempt,
                available=request.tools_available,
                steps_for=steps,
            )
            stopped = request.stop is not None and request.stop.is_set()
        except asyncio.CancelledError:
            stopped = True
            raise
        except Exception as exc:
            # What a user is told is decided once for every transport and every turn: a service's
            # own error as it says, a busy database as such, anything else only in the log.
            failure = error_classify(exc, where=f"agent run {run.id}")
            state.error = Failure(failure.message, failure.code)
        finally:
            result = await asyncio.shield(
                self._finish(run, state, model, request.stop if stopped else None, stopped)
            )
        return result

    async def end(
        self, run: AgentRun, stop: StopSignal, *, callback: StreamCallback | None = None, attempt: int = 2
    ) -> ExecuteResult:
        """Close a run whose process died, stopped (``stop``) before any of it ran here, exactly as
        a run stopped while it runs: what it did is taken from its stored events (its finished
        steps, the tool calls that have a result, its messages) and the text it had shown (kept on
        the run as it streamed); ``callback`` is told as a running one's is (``RunResumed``, that
        text as a ``TextDelta``, the ``RunError``), and ``agent_run_finish`` stores it all."""
        state = RunState(callback=callback, max_steps=1)
        try:
            await run_state_restore(state, run_id=run.id, attempt=attempt)
        except Exception as exc:
            failure = error_classify(exc, where=f"agent run {run.id} taken over")
            logger.warning("agent run %s: its stored events could not be read (%s)", run.id, failure.code)
        restored = "".join(state.text)
        if len(run.final_text) > len(restored):
            # The step that was streaming when its process died left no event: its text is what
            # the run kept of what it had shown, and it counts as a step as it would have there.
            state.steps += 1
            await state.stream_text(run.final_text[len(restored) :])
        return await asyncio.shield(self._finish(run, state, run.model, stop, True))

    async def _outcome(self, state: RunState, stop: StopSignal | None, stopped: bool) -> Outcome:
        if stopped:
            reason = await stop.reason() if stop is not None else CANCELLED
            failure = Failure(reason.message, reason.code)
            if reason.code in ERROR_STOPS:
                return Outcome(RunStatus.ERROR, reason.code, failure)
            return Outcome(RunStatus.CANCELLED, "cancelled", failure)
        if state.stop_reason == "approval_required":
            # Not a failure: the run did its part and waits; the decision starts the next run.
            return Outcome(RunStatus.SUCCESS, "approval_required")
        if state.stop_reason is not None:
            return Outcome(RunStatus.ERROR, state.stop_reason, Failure(state.stop_message, state.stop_reason))
        if state.error is not None:
            return Outcome(RunStatus.ERROR, state.error.code, state.error)
        return Outcome(RunStatus.SUCCESS, "completed")

    async def _finish(
        self, run: AgentRun, state: RunState, model: str, stop: StopSignal | None, stopped: bool
    ) -> ExecuteResult:
        state.close_pending()
        outcome = await self._outcome(state, stop, stopped)
        error = outcome.error
        if error is not None:
            try:
                await state.emit(RunError(message=error.message, code=error.code))
            except Exception:
                logger.warning(
                    "the stream callback failed on the error event of run %s", run.id, exc_info=True
                )
        text = "".join(state.text)
        await agent_run_finish(
            run=run,
            status=outcome.status,
            stop_reason=outcome.stop_reason,
            error=error.message if error else "",
            model=model,
            step_count=state.steps,
            usage=state.usage,
            final_text=text,
            messages=_trace(state.messages, state.tool_calls),
            records=[r.model_copy(update={"output": _jsonable(r.output)}) for r in state.tool_calls],
        )
        return ExecuteResult(
            run_id=run.id,
            status=outcome.status,
            stop_reason=outcome.stop_reason,
            text=text,
            error=error.message if error else None,
            error_code=error.code if error else None,
            tool_calls=list(state.tool_calls),
            messages=[as_the_model_saw(m) for m in state.messages if m.role != "user"],
            usage=state.usage,
            model=model,
            steps=state.steps,
            approval=state.paused,
        )


def _gates(
    request: ExecuteRequest, *, project_id: uuid.UUID, run_id: uuid.UUID, state: RunState
) -> Callable[[AgentDefinition], WriteGate] | None:
    """The write gate of each agent (root and sub-agents, each under its own tool policy)."""
    user_id = request.writer_user_id
    if user_id is None:
        return None

    def gate_for(definition: AgentDefinition) -> WriteGate:
        return WriteGate(
            definition=definition,
            project_id=project_id,
            user_id=user_id,
            run_id=run_id,
            conversation_id=request.conversation_id,
            on_pending=state.pause,
        )

    return gate_for


def _trace(messages: Sequence[HistoryMessage], records: Sequence[ToolCallRecord]) -> list[TraceMessage]:
    """The run's messages numbered by step (a tool result carries the step of its call)."""
    step_of: dict[str, int] = {r.call_id: r.step for r in records}
    trace: list[TraceMessage] = []
    step = 0
    for m in messages:
        if m.role == "assistant":
            step += 1
        calls = [c.model_dump(mode="json") for c in m.tool_calls]
        number = step_of.get(m.tool_calls[0].id, step) if m.tool_calls and m.role == "tool" else step
        trace.append(TraceMessage(step_number=number, role=m.role, content=m.content, tool_calls=calls))
    return trace


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str)) if value is not None else None

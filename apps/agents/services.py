"""Every write of the agent audit trail (``kb.agent_runs``, ``agent_run_messages``, ``agent_run_tool_calls``).

A run's whole lifecycle lives here: ``agent_run_start`` opens it (``agent_run_plain`` builds a plain
answer's record, closed, for the chat turn to store with the answer), ``agent_run_text_keep`` keeps
what it has streamed so far (so a crash loses nothing the user saw), ``agent_run_take_over`` makes
the run of a process that died another's (which resumes or ends it), ``agent_run_finish`` closes
it once with its outcome, and ``agent_runs_interrupt_orphaned`` closes the batch runs of processes that
died (a chat turn's run is taken over instead). ``agent_run_events_append`` stores its ADK session events. The start and finish are async: the executor runs on the event loop.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import psutil
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.agents.events import ERROR_STOPS, ModelUsage, RunError, ToolCallRecord, TraceMessage
from apps.agents.llm.base import Usage
from apps.agents.models import AgentRun, AgentRunEvent, AgentRunMessage, AgentRunToolCall, RunStatus
from apps.core.db import rows_write
from apps.core.inputs import storable


def worker_name() -> str:
    """This server process, so that a restarted one can mark its orphaned runs interrupted."""
    return f"{socket.gethostname()}:{os.getpid()}"


def worker_is_dead(worker: str, since: datetime | None) -> bool:
    """Whether the process named ``host:pid`` (``worker_name``) that started work at ``since`` is
    gone. On another host that cannot be checked: there, work older than twice the turn timeout
    counts as abandoned. (Chat turns do not ask: they hold a lease, see ``chat.turns.recovery``.)"""
    host, _, pid_text = worker.rpartition(":")
    if not host or not pid_text.isdigit() or host != socket.gethostname():
        abandoned = timedelta(seconds=2 * settings.KGCHAT_TURN_TIMEOUT_SECONDS)
        return since is not None and since < timezone.now() - abandoned
    try:
        process = psutil.Process(int(pid_text))
        if process.status() == psutil.STATUS_ZOMBIE:  # exited, not yet reaped by its parent
            return True
        started = datetime.fromtimestamp(process.create_time(), tz=timezone.get_current_timezone())
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return True
    return since is not None and started > since + timedelta(seconds=1)


def agent_run_new(
    *,
    project_id: uuid.UUID,
    agent_definition_id: uuid.UUID | None,
    conversation_id: uuid.UUID | None,
    model: str = "",
    run_id: uuid.UUID | None = None,
    graph_version: Any = None,
) -> AgentRun:
    """A run (status ``running``) not saved yet: the chat turn service inserts it with the turn's
    other rows, so the executor reaches the model without a write of its own. ``graph_version``
    may be an expression the insert evaluates."""
    return AgentRun(
        graph_version=graph_version,
        id=run_id or uuid.uuid4(),
        project_id=project_id,
        agent_definition_id=agent_definition_id,
        conversation_id=conversation_id,
        model=model[:200],
        status=RunStatus.RUNNING,
        worker=worker_name()[:200],
    )


def agent_run_plain(
    *,
    project_id: uuid.UUID,
    conversation_id: uuid.UUID,
    model: str,
    usage: ModelUsage,
    stopped: RunError | None,
    graph_version: int | None,
    started_at: datetime,
) -> AgentRun:
    """The record of a plain answer's model call, closed and not saved yet: the chat turn stores it
    with the answer, in one statement, so that every answer's tokens are summed from ``kb.agent_runs``.

    It has no agent definition, one step, no messages and no tool calls; ``usage`` is what the
    model reported. ``stopped`` is the stop that cut the answer short (a timeout closes it as an
    error, anything else as cancelled, as an agent run's), None for a whole answer."""
    status, stop_reason = RunStatus.SUCCESS, "completed"
    if stopped is not None:
        status = RunStatus.ERROR if stopped.code in ERROR_STOPS else RunStatus.CANCELLED
        stop_reason = stopped.code if stopped.code in ERROR_STOPS else "cancelled"
    return AgentRun(
        id=uuid.uuid4(),
        project_id=project_id,
        agent_definition_id=None,
        conversation_id=conversation_id,
        status=status,
        stop_reason=stop_reason,
        error=storable(stopped.message) if stopped is not None else "",
        model=model[:200],
        step_count=1,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        graph_version=graph_version,
        worker=worker_name()[:200],
        started_at=started_at,
        completed_at=timezone.now(),
    )


def agent_run_open(
    *,
    project_id: uuid.UUID,
    agent_definition_id: uuid.UUID | None,
    conversation_id: uuid.UUID | None,
    model: str = "",
    run_id: uuid.UUID | None = None,
    graph_version: int | None = None,
) -> AgentRun:
    """Open a run (status ``running``) in the caller's transaction (``agent_run_new``, saved)."""
    run = agent_run_new(
        project_id=project_id,
        agent_definition_id=agent_definition_id,
        conversation_id=conversation_id,
        model=model,
        run_id=run_id,
        graph_version=graph_version,
    )
    run.save(force_insert=True)
    return run


async def agent_run_abandon(*, run_id: uuid.UUID, error: str) -> None:
    """Close a run that was opened but never reached the executor (its turn failed first)."""
    await AgentRun.objects.filter(id=run_id, status=RunStatus.RUNNING).aupdate(
        status=RunStatus.ERROR,
        stop_reason="internal_error",
        error=storable(error),
        completed_at=timezone.now(),
    )


async def agent_run_start(
    *,
    project_id: uuid.UUID,
    agent_definition_id: uuid.UUID | None,
    conversation_id: uuid.UUID | None,
    model: str = "",
    run_id: uuid.UUID | None = None,
    graph_version: int | None = None,
) -> AgentRun:
    """``agent_run_open`` on its own (a run no chat turn opened: batch runs, the executor alone)."""
    return await sync_to_async(agent_run_open)(
        project_id=project_id,
        agent_definition_id=agent_definition_id,
        conversation_id=conversation_id,
        model=model,
        run_id=run_id,
        graph_version=graph_version,
    )


def agent_run_take_over(*, run: AgentRun) -> bool:
    """Make a running run whose process died this process's: one more attempt, this ``worker``.
    False (nothing changed) when it ended meanwhile or another process took it first. What
    becomes of it is the caller's: it resumes, or ends (``AgentExecutor.end``)."""
    me = worker_name()[:200]
    taken = AgentRun.objects.filter(id=run.id, status=RunStatus.RUNNING, worker=run.worker).update(
        attempts=F("attempts") + 1, worker=me
    )
    if taken:
        run.attempts, run.worker = run.attempts + 1, me
    return bool(taken)


def agent_run_take_over_running(*, conversation_id: uuid.UUID) -> AgentRun | None:
    """Take over the running run of a conversation whose turn this process just claimed (its
    process died): locked, then made this process's (``agent_run_take_over``). None when the
    conversation has no running run (a plain turn, or a run that ended before its answer was
    stored). Call it in the claim's transaction."""
    run = (
        AgentRun.objects.select_for_update()
        .filter(conversation_id=conversation_id, status=RunStatus.RUNNING)
        .order_by("-started_at")
        .first()
    )
    if run is not None:
        agent_run_take_over(run=run)
    return run


def agent_run_close(*, run: AgentRun, status: RunStatus, stop_reason: str, error: str) -> None:
    """Close a run with nothing more than why (a run whose ending itself failed: nothing of it
    is read again)."""
    _close(run, status=status, stop_reason=stop_reason, error=error)


def agent_run_text_keep(*, run_id: uuid.UUID, text: str) -> None:
    """Keep the text a running run has streamed so far (recovery shows it if the process dies)."""
    AgentRun.objects.filter(id=run_id, status=RunStatus.RUNNING).update(final_text=storable(text))


def _closing(
    run: AgentRun, *, status: RunStatus, stop_reason: str, error: str, **fields: object
) -> dict[str, object]:
    """Set what a run's end stores on ``run`` (its status, why, when, and ``fields``); the columns."""
    values: dict[str, object] = {
        "status": status,
        "stop_reason": stop_reason[:64],
        "error": storable(error),
        "completed_at": timezone.now(),
        **fields,
    }
    for name, value in values.items():
        setattr(run, name, value)
    return values


def _close(run: AgentRun, *, status: RunStatus, stop_reason: str, error: str, **fields: object) -> None:
    """The one write of a run's end (its status, why, when); ``fields`` are more columns to store."""
    values = _closing(run, status=status, stop_reason=stop_reason, error=error, **fields)
    run.save(update_fields=list(values))


async def agent_run_finish(
    *,
    run: AgentRun,
    status: RunStatus,
    stop_reason: str,
    error: str = "",
    model: str = "",
    step_count: int = 0,
    usage: Usage | None = None,
    final_text: str = "",
    messages: Sequence[TraceMessage] = (),
    records: Sequence[ToolCallRecord] = (),
) -> AgentRun:
    """Close a run with its outcome, its messages and its tool calls: one statement, one round trip."""
    usage = usage or Usage()
    closing = {
        "model": (model or run.model)[:200],
        "step_count": step_count,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "final_text": storable(final_text),
    }
    # What the model wrote (and the arguments it passed) may hold NUL or lone surrogates.
    message_rows = [AgentRunMessage(run=run, **storable(m.model_dump())) for m in messages]
    call_rows = [
        AgentRunToolCall(
            run=run,
            call_id=storable(r.call_id[:200]),
            tool_name=storable(r.tool[:200]),
            input=storable(r.input),
            output=storable(r.output),
            error=storable(r.error or ""),
            duration_ms=r.duration_ms,
            step_number=r.step,
        )
        for r in records
    ]

    @sync_to_async
    def write() -> None:
        values = _closing(run, status=status, stop_reason=stop_reason, error=error, **closing)
        # Only while this process still runs it: one taken for dead (its turn's lease lapsed) and
        # resumed elsewhere does not close the run the other process now runs.
        mine = AgentRun.objects.filter(id=run.id, worker=run.worker) if run.worker else None
        rows_write(
            inserts=[*message_rows, *call_rows],
            updates=[(mine if mine is not None else AgentRun.objects.filter(id=run.id), values)],
        )

    await write()
    return run


def agent_runs_interrupt_orphaned(*, on_interrupted: Callable[[AgentRun], None] | None = None) -> int:
    """Close the running runs without a conversation (batch runs) of dead processes as
    ``interrupted``; return how many were closed. (A chat turn's run is taken over and resumed
    when its lease lapses: ``chat.turns.recovery``.)

    Safe when several processes start together: each run is closed under a row lock the others
    skip. ``on_interrupted`` runs in the same transaction for each closed run (the chat layer
    keeps its partial text as the conversation's answer), so that happens exactly once.
    """
    closed = 0
    running = AgentRun.objects.filter(status=RunStatus.RUNNING, conversation_id__isnull=True).values_list(
        "id", "worker", "started_at"
    )
    for run_id, worker, started_at in list(running):
        if not worker_is_dead(worker, started_at):
            continue
        with transaction.atomic():
            run = (
                AgentRun.objects.select_for_update(skip_locked=True)
                .filter(id=run_id, status=RunStatus.RUNNING)
                .first()
            )
            if run is None:
                continue
            _close(
                run,
                status=RunStatus.INTERRUPTED,
                stop_reason="interrupted",
                error="the server process running this turn stopped",
            )
            if on_interrupted is not None:
                on_interrupted(run)
            closed += 1
    return closed


# Read in the statement that stores a run's events: its commit does not wait for the WAL flush.
_SYNC_COMMIT_OFF: tuple[str, list[Any]] = ("SELECT set_config('synchronous_commit', 'off', true)", [])


async def agent_run_events_append(*, run_id: uuid.UUID, rows: Sequence[dict[str, Any]]) -> None:
    """Store ADK session events of a run (``RunSessionService``): one statement, one round trip.

    Committed without waiting for the WAL flush (``synchronous_commit`` off for this statement's
    transaction only: PostgreSQL applies the value in force at commit): what resumption guards
    against is the app process dying, which a commit survives the moment PostgreSQL has it; a
    crash of PostgreSQL itself may lose the last events of a run (its takeover then redoes those
    steps), never their order."""
    events = [AgentRunEvent(run_id=run_id, **storable(row)) for row in rows]
    await sync_to_async(rows_write)(inserts=events, reads=[_SYNC_COMMIT_OFF])


async def agent_run_events_load(*, run_id: uuid.UUID) -> list[tuple[bool, dict[str, Any]]]:
    """A run's stored ADK events, in order: (seeded, the event as stored)."""
    rows = AgentRunEvent.objects.filter(run_id=run_id).order_by("position").values_list("seeded", "event")
    return [(seeded, event) async for seeded, event in rows]

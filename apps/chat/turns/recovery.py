"""Turns whose process died: taken over when their lease lapses (issue #27), all in this module (#49).

Every running turn holds a lease on its conversation's claim (``active_turn_lease_until``), which
its process renews every third of ``KGCHAT_TURN_LEASE_SECONDS`` (``service._heartbeat``). Every
process looks, as often and as it starts (``takeover_start``), for claims whose lease lapsed or
whose process, on this host, is gone (``turns_expired_take``: ``FOR UPDATE SKIP LOCKED``, so each
is taken by one process) and takes them over (``turns_take_over``):

- an agent turn resumes in this process from its run's stored ADK events (``attempts`` + 1), as
  the ``Turn`` that ``taken_over_turn`` rebuilds;
- unless a cancel was asked for meanwhile (it ends as cancelled) or its run has already had
  ``KGCHAT_TURN_MAX_ATTEMPTS`` attempts (it ends with ``turn_failed_repeatedly``): it then goes
  on here stopped, and ends exactly as it would have in its own process (its tool calls, tool
  rows, partial answer and frames, from its stored events: ``AgentExecutor.end``);
- a plain turn is not resumable (it ends as interrupted, its saved text kept as the answer, its
  last frames published by ``taken_over_end``).

A deleted conversation has no claim to take over: its run, left ``running``, is ended as the
deletion of a running turn ends it (``runs_of_deleted_conversations``). A decided approval whose
continuing turn never started is started here. ``kb.agent_runs`` is written only by its writer,
``apps.agents.services``. The turn service lends the takeover how a turn runs in it
(``TurnRunner``), so this module does not import the service that starts it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from apps.agents.events import CANCELLED, StopReason, StopSignal, ToolResume
from apps.agents.executor import AgentExecutor
from apps.agents.models import AgentRun, RunStatus
from apps.agents.services import (
    agent_run_close,
    agent_run_take_over,
    agent_run_take_over_running,
    agent_runs_interrupt_orphaned,
    worker_is_dead,
    worker_name,
)
from apps.chat.models import Conversation, Message, MessageRole
from apps.chat.streams.bus import get_bus
from apps.chat.streams.frames import DoneFrame, ErrorFrame
from apps.chat.turns import admission
from apps.chat.turns.approval_events import (
    approval_event,
    approvals_announce,
    decided_approvals_never_continued,
)
from apps.chat.turns.claim import TurnInProgress, claim_release, lease_seconds
from apps.chat.turns.turn import CONVERSATION_DELETED, Turn, TurnHandle
from apps.core.db import release_connections
from apps.graph_tools.models import WriteApproval
from apps.graph_tools.selectors import approval_result
from apps.projects.selectors import parse_uuid

log = logging.getLogger("kgchat.chat")

# Claims taken over in one pass, at most (the rest wait for the next pass, or another process).
TAKE_AT_ONCE = 20


@dataclass
class Takeover:
    """A turn whose lease lapsed, now claimed by this process; ``outcome`` says what becomes of it:
    ``resume`` (``run`` goes on here), or it ends: ``cancelled``, ``failed`` (too many attempts),
    both through its run like a resumed one (``ending``), or ``interrupted`` (a plain turn, or an
    agent turn whose run is gone)."""

    conversation_id: uuid.UUID
    turn_id: uuid.UUID
    outcome: str
    run: AgentRun | None = None
    # The mark the dead process saved with the turn (``turn.TurnProgress``): where its frames were.
    shown: dict[str, Any] = field(default_factory=dict)
    # Why its run, taken over here, ends rather than goes on (a cancel, too many attempts): it is
    # stopped with this before it runs, and ends as a run stopped in its own process would.
    ending: StopReason | None = None
    # Its run was closed here already (the ending itself failed before): only its last frames remain.
    closed: bool = False


@dataclass
class Expired:
    """What a takeover pass found: the turns whose lease lapsed, now this process's; the decided
    approvals whose continuing turn never started; the runs of conversations deleted meanwhile."""

    turns: list[Takeover]
    approvals: list[WriteApproval]
    runs_of_deleted: list[AgentRun]


@dataclass(frozen=True)
class TurnRunner:
    """How a turn runs in the turn service, lent to the takeover: ``launch`` a taken-over turn,
    ``resume`` the turn of a decided approval, and the turns ``running`` in this process now."""

    launch: Callable[[Turn], Awaitable[object]]
    resume: Callable[[WriteApproval], Awaitable[TurnHandle | None]]
    running: Collection[uuid.UUID]


async def turns_take_over(runner: TurnRunner) -> int:
    """Take over the turns whose lease lapsed (``turns_expired_take``): go on with each
    agent turn in this process, resumed or stopped; end the others with their last frames; end
    the runs of deleted conversations. How many turns were taken.

    A turn this process still runs is never taken here, even with its lease lapsed (its heartbeat
    starved of CPU): it is alive, and a second run of it would stream and store its answer twice."""
    expired = await sync_to_async(expired_take, thread_sensitive=False)(list(runner.running))
    await runs_of_deleted_end(expired.runs_of_deleted)
    for approval in expired.approvals:
        await _continue_decided(approval, runner)
    for taken in expired.turns:
        try:
            await taken_over_go(taken, runner.launch)
        except Exception:
            log.exception("taking over turn %s failed; its lease lapses again", taken.turn_id)
    return len(expired.turns) + len(expired.approvals)


async def _continue_decided(approval: WriteApproval, runner: TurnRunner) -> None:
    """Start the turn that continues a decided approval, which its deciding process died before
    starting (the decision, and an approved write, stand: the agent gets its result)."""
    try:
        handle = await runner.resume(approval)
    except TurnInProgress:
        return  # another process started it meanwhile
    except Exception:
        log.exception("continuing approval %s failed; tried again later", approval.id)
        return
    await approvals_announce([approval_event(approval, continued=handle is not None)])


_takeover_task: asyncio.Task[None] | None = None


def takeover_start(runner: TurnRunner) -> None:
    """Start this process's takeover loop (once): every third of the lease, ``turns_take_over``."""
    global _takeover_task
    if _takeover_task is not None and not _takeover_task.done():
        return
    _takeover_task = asyncio.get_running_loop().create_task(_takeover_loop(runner), name="turn takeover")


async def _takeover_loop(runner: TurnRunner) -> None:
    while True:
        try:
            await turns_take_over(runner)
        except Exception:
            log.warning("taking over turns whose lease lapsed failed; trying again", exc_info=True)
        await asyncio.sleep(lease_seconds() / 3)


_recovered = False
_recovery_lock = threading.Lock()


def _recover_once_sync() -> None:
    global _recovered
    try:
        with _recovery_lock:
            if not _recovered:
                interrupted_turns_recover()
                _recovered = True
    finally:
        release_connections()


async def recover_once(runner: TurnRunner) -> None:
    """Before this process serves anything: close dead processes' batch runs (once), and start
    taking over the chat turns whose lease lapses (``takeover_start``). A failed attempt (the
    database is down) is tried again by the next request."""
    takeover_start(runner)
    if not _recovered:
        await sync_to_async(_recover_once_sync)()


def expired_take(running: Sequence[uuid.UUID] = ()) -> Expired:
    """The turns whose lease lapsed, now this process's (but those in ``running``, this process's
    live turns); the decided approvals whose continuing turn never started (to start here); the
    runs of deleted conversations, each now this process's (to end here)."""
    try:
        deleted = [run for run in runs_of_deleted_conversations() if agent_run_take_over(run=run)]
        return Expired(
            turns_expired_take(running=running),
            decided_approvals_never_continued(limit=TAKE_AT_ONCE),
            deleted,
        )
    finally:
        release_connections()


def turns_expired_take(*, limit: int = TAKE_AT_ONCE, running: Sequence[uuid.UUID] = ()) -> list[Takeover]:
    """Claim the turns whose lease lapsed for this process and decide what becomes of each.

    One transaction: the claims move to this process with a fresh lease, and each one's running
    run becomes this process's with one more attempt (its writer's ``agent_run_take_over_running``). A plain turn ends
    here (answer, claim); the caller runs the agent turns, resumed or stopped, and publishes the
    last frames of the others.

    ``running``: the turns this process is running now. Their lease can lapse while they are
    alive (a heartbeat starved of CPU longer than the lease); taking one would run it a second
    time beside itself, so they are left to their heartbeat."""
    conversations = connection.ops.quote_name(Conversation._meta.db_table)
    taken: list[Takeover] = []
    dead = dead_workers_here()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"""UPDATE {conversations} SET active_turn_worker = %s,
                    active_turn_lease_until = now() + make_interval(secs => %s)
                WHERE id IN (
                    SELECT id FROM {conversations}
                    WHERE active_turn_id IS NOT NULL
                        AND (active_turn_lease_until < now() OR active_turn_worker = ANY(%s))
                        AND NOT active_turn_id = ANY(%s::uuid[])
                    ORDER BY active_turn_lease_until LIMIT %s FOR UPDATE SKIP LOCKED)
                RETURNING id, active_turn_id, active_turn_cancelled, active_turn_text, active_turn_shown""",
            [worker_name()[:200], lease_seconds(), dead, list(running), limit],
        )
        rows = cursor.fetchall()
        for conversation_id, turn_id, cancelled, text, shown in rows:
            run = agent_run_take_over_running(conversation_id=conversation_id)
            takeover = _decide(conversation_id, turn_id, run, cancelled=cancelled, text=text)
            takeover.shown = _mark(shown)
            taken.append(takeover)
    return taken


def dead_workers_here() -> list[str]:
    """The processes of this host holding a claim whose lease still runs, but which are gone
    (killed, crashed): their turns are taken over at once rather than when the lease lapses, so
    that a restarted single process (``make run`` again) goes on with its turn as it starts.
    A process of another host is only known dead by its lease."""
    host, me = socket.gethostname(), worker_name()
    workers = (
        Conversation.objects.filter(active_turn_id__isnull=False, active_turn_lease_until__gte=timezone.now())
        .exclude(active_turn_worker=me)
        .values_list("active_turn_worker", flat=True)
        .distinct()
    )
    return [w for w in workers if w.rpartition(":")[0] == host and worker_is_dead(w, None)]


def _mark(shown: object) -> dict[str, Any]:
    """The saved mark as read (the driver may hand over jsonb as text); {} when there is none."""
    if isinstance(shown, str | bytes):
        shown = json.loads(shown or "{}")
    return shown if isinstance(shown, dict) else {}


def _decide(
    conversation_id: uuid.UUID, turn_id: uuid.UUID, run: AgentRun | None, *, cancelled: bool, text: str
) -> Takeover:
    if run is None:
        # A plain turn (not resumable: its model call cannot be rebuilt from stored steps) or a
        # run that ended before its answer was stored: the text it had streamed is the answer.
        if text:
            Message.objects.create(
                conversation_id=conversation_id,
                role=MessageRole.ASSISTANT,
                content=text,
                retrieval_context={"strategy": "always_retrieve", "stop_reason": "interrupted"},
            )
        claim_release(conversation_id, turn_id)
        return Takeover(conversation_id, turn_id, "interrupted")
    died = run.attempts - 1
    if run.attempts > settings.KGCHAT_TURN_MAX_ATTEMPTS + 1:
        # Even ending it failed (its process died reading what it did): nothing of it is read again.
        agent_run_close(
            run=run, status=RunStatus.ERROR, stop_reason="turn_failed_repeatedly", error=_failed(died).message
        )
        claim_release(conversation_id, turn_id)
        return Takeover(conversation_id, turn_id, "failed", run, closed=True)
    # Ending here, it ends as it would have in its own process: its run goes on in this one, stopped.
    if cancelled:
        return Takeover(conversation_id, turn_id, "cancelled", run, ending=CANCELLED)
    if run.attempts > settings.KGCHAT_TURN_MAX_ATTEMPTS:
        return Takeover(conversation_id, turn_id, "failed", run, ending=_failed(died))
    return Takeover(conversation_id, turn_id, "resume", run)


def _failed(died: int) -> StopReason:
    return StopReason(
        code="turn_failed_repeatedly",
        message=f"the server process running this turn stopped {died} times; it is not resumed again",
    )


def runs_of_deleted_conversations() -> list[AgentRun]:
    """The runs left ``running`` whose conversation was deleted while no process ran them (a
    deletion wins over resumption); the caller takes each over and ends it as the deletion of a
    running turn does (``AgentExecutor.end``)."""
    now = timezone.now()
    runs = AgentRun.objects.filter(
        ~Exists(Conversation.objects.filter(id=OuterRef("conversation_id"))),
        status=RunStatus.RUNNING,
        conversation_id__isnull=False,
        started_at__lt=now - timedelta(seconds=lease_seconds()),
    )
    # A run whose process, on this host, is alive ends itself: its lease's renewal finds the
    # conversation gone within a third of the lease.
    host = socket.gethostname()
    return [
        run
        for run in runs[:TAKE_AT_ONCE]
        if run.worker.rpartition(":")[0] != host or worker_is_dead(run.worker, None)
    ]


def interrupted_turns_recover() -> int:
    """Close the runs without a conversation (batch runs) of dead processes; return how many.

    Chat turns are not closed here: their lease lapses and a process takes them over."""
    return agent_runs_interrupt_orphaned()


async def runs_of_deleted_end(runs: Sequence[AgentRun]) -> None:
    """End the runs of conversations deleted while no process ran them, as the deletion of a
    running turn ends its run: cancelled, with what they did (``AgentExecutor.end``)."""
    for run in runs:
        stop = StopSignal()
        stop.stop(CONVERSATION_DELETED)
        try:
            await AgentExecutor().end(run, stop, attempt=run.attempts)
        except Exception:
            log.exception("ending run %s of a deleted conversation failed; tried again later", run.id)


async def taken_over_go(takeover: Takeover, launch: Callable[[Turn], Awaitable[object]]) -> None:
    """Go on with a taken-over turn: an agent turn as its run's next attempt in this process
    (``launch``), resumed or stopped by its ``ending``; else (or when its conversation or agent
    is gone) it ends here with its last frames."""
    if takeover.run is not None and not takeover.closed:
        turn = await sync_to_async(taken_over_turn, thread_sensitive=False)(takeover)
        if turn is not None:
            await launch(turn)
            return
        if takeover.ending is not None:
            stop = StopSignal()
            stop.stop(takeover.ending)
            await AgentExecutor().end(takeover.run, stop, attempt=takeover.run.attempts)
    await taken_over_end(takeover)


def taken_over_turn(takeover: Takeover) -> Turn | None:
    """The ``Turn`` a taken-over agent turn goes on as (its run's next attempt); None when its
    conversation or agent is gone (the turn then ends)."""
    try:
        run = takeover.run
        assert run is not None
        conversation = (
            Conversation.objects.select_related("agent_definition", "project")
            .filter(id=takeover.conversation_id, active_turn_id=takeover.turn_id)
            .first()
        )
        user_message = (
            Message.objects.filter(conversation_id=takeover.conversation_id, role=MessageRole.USER)
            .order_by("-created_at", "-id")
            .first()
        )
        if conversation is None or conversation.agent_definition is None or user_message is None:
            return None
        turn = admission.turn_build(
            turn_id=takeover.turn_id,
            conversation=conversation,
            project=conversation.project,
            definition=conversation.agent_definition,
            user_message=user_message,
            # The history window (the run's stored events hold it, unless it died before its first).
            resume=_decided_call(conversation),
            run_id=run.id,
            graph_version=run.graph_version or 0,
        )
        turn.run, turn.attempt, turn.ending = run, run.attempts, takeover.ending
        # Where the dead process's frames were (its saved mark); a bus that kept its frames
        # (Redis) says it exactly instead (``service._launch``).
        shown = takeover.shown
        turn.seq = int(shown.get("seq") or 0)
        turn.shown_chars = int(shown["chars"]) if "chars" in shown else len(run.final_text)
        turn.completed_calls = {str(c) for c in shown.get("calls") or ()}
        return turn
    finally:
        release_connections()


def _decided_call(conversation: Conversation) -> ToolResume | None:
    """When the taken-over turn continued a decided approval (the conversation's last message is
    the paused answer carrying its call), that call's result: the new message of a run that died
    before storing its first event (``adk_run`` sends it again then; otherwise it is stored)."""
    last = Message.objects.filter(conversation=conversation).order_by("-created_at", "-id").first()
    context = last.retrieval_context if last is not None else None
    if not isinstance(context, dict) or context.get("stop_reason") != "approval_required":
        return None
    approval_id = parse_uuid(context.get("approval_id"))
    approval = WriteApproval.objects.filter(id=approval_id).first() if approval_id else None
    if approval is None or approval.status == "pending":
        return None
    return ToolResume(call_id=approval.call_id, tool=approval.tool_name, result=approval_result(approval))


async def taken_over_end(takeover: Takeover) -> None:
    """Publish the last frames of a taken-over turn that ends without going on (closed already),
    and release its claim."""
    bus = get_bus()
    key = str(takeover.conversation_id)
    resumed = await bus.resume(key, str(takeover.turn_id))
    frames: dict[str, ErrorFrame] = {
        "cancelled": ErrorFrame(error="the run was cancelled", code="cancelled"),
        "failed": ErrorFrame(
            error="the server process running this turn stopped too often; it was not resumed again",
            code="turn_failed_repeatedly",
        ),
        "interrupted": ErrorFrame(
            error="the server process running this turn stopped; the answer so far is kept",
            code="interrupted",
        ),
        "resume": ErrorFrame(error="the conversation or its agent is gone", code="interrupted"),
    }
    run_id = str(takeover.run.id) if takeover.run is not None else None
    # After the frames the dead process published: as the bus kept them, or as it saved its mark.
    seq = resumed.seq or int(takeover.shown.get("seq") or 0)
    try:
        ending = takeover.ending
        frame = ErrorFrame(error=ending.message, code=ending.code) if ending else frames[takeover.outcome]
        frame.seq = seq + 1
        await bus.publish(key, frame)
        await bus.publish(key, DoneFrame(messageId=None, runId=run_id, seq=seq + 2))
    finally:
        await bus.finish(key)
    if takeover.outcome != "interrupted" and not takeover.closed:
        await sync_to_async(claim_release)(takeover.conversation_id, takeover.turn_id)

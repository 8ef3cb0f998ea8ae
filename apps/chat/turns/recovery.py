"""Turns whose process died: taken over when their lease lapses (issue #27).

Every running turn holds a lease on its conversation's claim (``active_turn_lease_until``), which
its process renews every third of ``KGCHAT_TURN_LEASE_SECONDS`` (``service._heartbeat``). Every
process looks, as often and as it starts, for claims whose lease lapsed or whose process, on this
host, is gone (``turns_expired_take``: ``FOR UPDATE SKIP LOCKED``, so each is taken by one
process) and takes them over:

- an agent turn resumes in this process from its run's stored ADK events (``attempts`` + 1);
- unless a cancel was asked for meanwhile (it ends as cancelled) or its run has already had
  ``KGCHAT_TURN_MAX_ATTEMPTS`` attempts (it ends with ``turn_failed_repeatedly``): it then goes
  on here stopped, and ends exactly as it would have in its own process (its tool calls, tool
  rows, partial answer and frames, from its stored events: ``AgentExecutor.end``);
- a plain turn is not resumable (it ends as interrupted, its saved text kept as the answer).

A deleted conversation has no claim to take over: its run, left ``running``, is ended as the
deletion of a running turn ends it (``runs_of_deleted_conversations``). ``kb.agent_runs`` is
written only by its writer, ``apps.agents.services``.
"""

from __future__ import annotations

import json
import logging
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from apps.agents.events import CANCELLED, StopReason
from apps.agents.models import AgentRun, RunStatus
from apps.agents.services import (
    agent_run_close,
    agent_run_take_over_running,
    agent_runs_interrupt_orphaned,
    worker_is_dead,
    worker_name,
)
from apps.chat.models import Conversation, Message, MessageRole
from apps.chat.turns.claim import claim_release, lease_seconds
from apps.graph_tools.models import ApprovalStatus, WriteApproval

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


def decided_approvals_never_continued() -> list[WriteApproval]:
    """Approvals decided (approved: the write done; or declined) whose continuing turn never
    started: the process died between the decision's commit and the turn's claim. Decided at least
    a lease ago (the deciding process claims at once) and within the turn timeout; their
    conversation free, its last message still the answer paused for this approval, and no run of
    it started since the decision (a continuation that ran and failed is not run again)."""
    now = timezone.now()
    candidates = WriteApproval.objects.filter(
        Exists(Conversation.objects.filter(id=OuterRef("conversation_id"), active_turn_id__isnull=True)),
        ~Exists(
            AgentRun.objects.filter(
                conversation_id=OuterRef("conversation_id"), started_at__gte=OuterRef("decided_at")
            )
        ),
        status__in=[ApprovalStatus.APPROVED, ApprovalStatus.REJECTED],
        decided_at__lt=now - timedelta(seconds=lease_seconds()),
        decided_at__gte=now - timedelta(seconds=settings.KGCHAT_TURN_TIMEOUT_SECONDS),
    ).exclude(call_id="")
    found = []
    candidates = candidates.select_related("decided_by")  # what ``approval_event`` tells
    for approval in candidates[:TAKE_AT_ONCE]:
        if approval.conversation_id is None:
            continue
        last = (
            Message.objects.filter(conversation_id=approval.conversation_id)
            .order_by("-created_at", "-id")
            .only("retrieval_context")
            .first()
        )
        context = last.retrieval_context if last is not None else None
        if isinstance(context, dict) and context.get("approval_id") == str(approval.id):
            found.append(approval)
    return found


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

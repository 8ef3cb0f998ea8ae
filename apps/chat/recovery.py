"""Crash safety: turns and runs left open by a process that died are closed as ``interrupted``.

A process is known dead when it ran on this host and its pid is gone (or now belongs to a
process started after the turn); elsewhere a turn is taken as orphaned once it is older than
``STALE_AFTER``. The partial answer a turn had streamed (saved as it went: on the agent run, or
on the conversation's claim for a plain turn) is kept as the conversation's assistant message with
the stop reason ``interrupted``, so nothing the user saw is lost.

Every server process recovers once, before it serves its first request (``recover_once`` in
apps/chat/services.py, called from config/asgi.py), and ``make run`` runs ``recover_turns`` first.
"""

from __future__ import annotations

import logging
import socket
import uuid
from datetime import datetime, timedelta

import psutil
from django.db import transaction
from django.utils import timezone

from apps.agents.models import AgentRun, RunStatus
from apps.chat.models import Conversation, Message, MessageRole

log = logging.getLogger("kgchat.recovery")

STALE_AFTER = timedelta(minutes=15)


def worker_is_dead(worker: str, since: datetime | None) -> bool:
    """Whether the process named ``host:pid`` that started work at ``since`` is gone."""
    host, _, pid_text = worker.rpartition(":")
    if not host or not pid_text.isdigit():
        return since is not None and since < timezone.now() - STALE_AFTER
    if host != socket.gethostname():
        return since is not None and since < timezone.now() - STALE_AFTER
    try:
        process = psutil.Process(int(pid_text))
        started = datetime.fromtimestamp(process.create_time(), tz=timezone.get_current_timezone())
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return True
    return since is not None and started > since + timedelta(seconds=1)


def _interrupt_run(run: AgentRun) -> None:
    now = timezone.now()
    AgentRun.objects.filter(id=run.id, status=RunStatus.RUNNING).update(
        status=RunStatus.INTERRUPTED,
        stop_reason="interrupted",
        error="the server process running this turn stopped",
        completed_at=now,
    )
    if run.conversation_id is None or not run.final_text:
        return
    answered = Message.objects.filter(
        conversation_id=run.conversation_id, retrieval_context__agent_run_id=str(run.id)
    ).exists()
    if not answered:
        Message.objects.create(
            conversation_id=run.conversation_id,
            role=MessageRole.ASSISTANT,
            content=run.final_text,
            retrieval_context={"agent_run_id": str(run.id), "stop_reason": "interrupted"},
        )


def _recover_claim(conversation_id: uuid.UUID, turn_id: uuid.UUID) -> None:
    """Release a dead process's claim; a plain turn's saved text becomes the interrupted answer."""
    conversation = (
        Conversation.objects.select_for_update(skip_locked=True)
        .filter(id=conversation_id, active_turn_id=turn_id)
        .first()
    )
    if conversation is None:  # released meanwhile, or another process is recovering it
        return
    if conversation.active_turn_text:
        Message.objects.create(
            conversation_id=conversation.id,
            role=MessageRole.ASSISTANT,
            content=conversation.active_turn_text,
            retrieval_context={"strategy": "always_retrieve", "stop_reason": "interrupted"},
        )
    Conversation.objects.filter(id=conversation.id).update(
        active_turn_id=None, active_turn_started_at=None, active_turn_worker="", active_turn_text=""
    )


def interrupted_turns_recover() -> int:
    """Close the runs and conversation claims of dead processes; return how many runs were closed.

    Safe when several processes start together: each run and claim is recovered under a row
    lock that the others skip, so an interrupted answer is written once.
    """
    closed = 0
    running = AgentRun.objects.filter(status=RunStatus.RUNNING).values_list("id", "worker", "started_at")
    for run_id, worker, started_at in list(running):
        if not worker_is_dead(worker, started_at):
            continue
        with transaction.atomic():
            run = (
                AgentRun.objects.select_for_update(skip_locked=True)
                .filter(id=run_id, status=RunStatus.RUNNING)
                .first()
            )
            if run is not None:
                _interrupt_run(run)
                closed += 1
    claims = Conversation.objects.filter(active_turn_id__isnull=False).values_list(
        "id", "active_turn_id", "active_turn_worker", "active_turn_started_at"
    )
    for conversation_id, turn_id, claimed_by, claimed_at in list(claims):
        if turn_id is not None and worker_is_dead(claimed_by, claimed_at):
            with transaction.atomic():
                _recover_claim(conversation_id, turn_id)
    if closed:
        log.warning("marked %d agent runs of stopped processes as interrupted", closed)
    return closed

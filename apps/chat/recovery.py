"""Crash safety: turns and runs left open by a process that died are closed as ``interrupted``.

A process is known dead when it ran on this host and its pid is gone (or now belongs to a
process started after the turn); elsewhere a turn is taken as orphaned once it is older than
``STALE_AFTER``. The partial answer a run had streamed (saved as it went) is kept: on the run,
and as the conversation's assistant message with the stop reason, so nothing the user saw is lost.
"""

from __future__ import annotations

import logging
import socket
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


def interrupted_turns_recover() -> int:
    """Close the runs and conversation claims of dead processes; return how many runs were closed."""
    closed = 0
    for run in AgentRun.objects.filter(status=RunStatus.RUNNING):
        if worker_is_dead(run.worker, run.started_at):
            with transaction.atomic():
                _interrupt_run(run)
            closed += 1
    for conversation in Conversation.objects.filter(active_turn_id__isnull=False):
        if worker_is_dead(conversation.active_turn_worker, conversation.active_turn_started_at):
            Conversation.objects.filter(
                id=conversation.id, active_turn_id=conversation.active_turn_id
            ).update(active_turn_id=None, active_turn_started_at=None, active_turn_worker="")
    if closed:
        log.warning("marked %d agent runs of stopped processes as interrupted", closed)
    return closed

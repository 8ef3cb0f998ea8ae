"""Turns whose process died: their runs and claims are closed, and what they had streamed is kept."""

from __future__ import annotations

import logging
import threading

from asgiref.sync import sync_to_async
from django.db import transaction

from apps.agents.models import AgentRun
from apps.agents.services import (
    agent_runs_interrupt_orphaned,
    worker_is_dead,
)
from apps.chat.models import Conversation, Message, MessageRole
from apps.chat.turns.claim import claim_reclaim_dead
from apps.core.db import (
    release_connections,
)

log = logging.getLogger("kgchat.chat")


def _keep_interrupted_answer(run: AgentRun) -> None:
    """The partial text of an interrupted agent run becomes its conversation's answer (once)."""
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
    """Close the runs and conversation claims of dead processes; return how many runs were closed.

    A process is dead when it ran on this host and its pid is gone (or belongs to a newer
    process); elsewhere when its work is older than ``STALE_AFTER``. The partial answer a turn
    had streamed (saved on its run, or on the claim for a plain turn) is kept as the
    conversation's answer with the stop reason ``interrupted``, so nothing the user saw is lost.
    Safe when several processes start together: every row is recovered under a lock the others skip.
    """
    closed = agent_runs_interrupt_orphaned(on_interrupted=_keep_interrupted_answer)
    claims = Conversation.objects.filter(active_turn_id__isnull=False).values_list(
        "id", "active_turn_id", "active_turn_worker", "active_turn_started_at"
    )
    for conversation_id, turn_id, claimed_by, claimed_at in list(claims):
        if turn_id is not None and worker_is_dead(claimed_by, claimed_at):
            with transaction.atomic():
                claim_reclaim_dead(conversation_id, turn_id)
    if closed:
        log.warning("marked %d agent runs of stopped processes as interrupted", closed)
    return closed


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


async def recover_once() -> None:
    """Recover turns orphaned by dead processes, once per process, before it serves anything.

    Requests arriving meanwhile wait for it (so a page already shows the interrupted answer);
    a failed attempt (the database is down) is tried again by the next request.
    """
    if not _recovered:
        await sync_to_async(_recover_once_sync)()

"""The conversation's claim: one turn at a time. Taken when a turn is admitted, released when it
ends (or when its process died), the one place each of these is written."""

from __future__ import annotations

import json
import logging
import uuid

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.agents.services import agent_run_text_keep, worker_name
from apps.chat.models import Conversation
from apps.chat.turns.turn import CLAIMED_MARK, Turn
from apps.core.db import (
    bound_cursor,
    is_database_busy,
    release_connections,
)
from apps.core.errors import ServiceError
from apps.graph_tools.models import WriteApproval

log = logging.getLogger("kgchat.chat")


class TurnInProgress(ServiceError):
    """a turn is already running in this conversation"""

    status = 409
    code = "turn_in_progress"


def claim_take(conversation_id: uuid.UUID, turn_id: uuid.UUID) -> bool:
    """Claim the conversation for ``turn_id``: free, or held by a turn long abandoned (``ABANDONED``)."""
    return claim_take_reading_approvals(conversation_id, turn_id) is not None


def lease_seconds() -> int:
    """How long a turn's lease lasts (``KGCHAT_TURN_LEASE_SECONDS``); renewed every third of it."""
    return max(1, int(settings.KGCHAT_TURN_LEASE_SECONDS))


def abandoned_after() -> int:
    """Seconds after its lease lapsed a claim counts as abandoned, so that a new message may take
    it: by then every process's takeover (every third of the lease) has had many tries, and a
    turn still running past the turn timeout has been stopped. Until then the turn is resumed."""
    return int(settings.KGCHAT_TURN_TIMEOUT_SECONDS)


def claim_take_reading_approvals(conversation_id: uuid.UUID, turn_id: uuid.UUID) -> bool | None:
    """Claim the conversation for ``turn_id`` (free, or held by a turn abandoned long ago),
    answering in the same statement whether it has ever had a write approval: None when the claim
    failed, else that answer. The one place the claim's condition is written; the claim comes with
    a lease (``active_turn_lease_until``, the database's clock) that the turn's process renews."""
    now = timezone.now()
    conversations = connection.ops.quote_name(Conversation._meta.db_table)
    approvals = connection.ops.quote_name(WriteApproval._meta.db_table)
    with bound_cursor() as cursor:  # one of a turn's statements: prepared on a pooled connection
        cursor.execute(
            f"""UPDATE {conversations}
                SET active_turn_id = %s, active_turn_started_at = %s, active_turn_worker = %s,
                    active_turn_text = '', active_turn_shown = %s::jsonb, active_turn_cancelled = false,
                    active_turn_lease_until = now() + make_interval(secs => %s), updated_at = %s
                WHERE id = %s AND (active_turn_id IS NULL
                    OR active_turn_lease_until IS NULL
                    OR active_turn_lease_until < now() - make_interval(secs => %s))
                RETURNING EXISTS (SELECT 1 FROM {approvals} WHERE conversation_id = %s)""",
            [
                turn_id,
                now,
                worker_name(),
                json.dumps(CLAIMED_MARK),
                lease_seconds(),
                now,
                conversation_id,
                abandoned_after(),
                conversation_id,
            ],
        )
        row = cursor.fetchone()
    return None if row is None else bool(row[0])


def claim_renew(conversation_id: uuid.UUID, turn_id: uuid.UUID) -> tuple[str, bool]:
    """Renew the lease of the turn ``turn_id`` runs in this process: (what holds the claim, a
    cancel was asked for). What holds it: ``held`` (this process, renewed), ``gone`` (the
    conversation was deleted), ``taken`` (another process took the turn over: this one was taken
    for dead) or ``released`` (the turn is ending)."""
    conversations = connection.ops.quote_name(Conversation._meta.db_table)
    me = worker_name()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""UPDATE {conversations} SET active_turn_lease_until = now() + make_interval(secs => %s)
                WHERE id = %s AND active_turn_id = %s AND active_turn_worker = %s
                RETURNING active_turn_cancelled""",
            [lease_seconds(), conversation_id, turn_id, me],
        )
        row = cursor.fetchone()
        if row is not None:
            return "held", bool(row[0])
        cursor.execute(
            f"SELECT active_turn_id, active_turn_worker FROM {conversations} WHERE id = %s", [conversation_id]
        )
        found = cursor.fetchone()
    if found is None:
        return "gone", False
    if found[0] == turn_id and found[1] != me:
        return "taken", False
    return "released", False


def claim_cancel_ask(conversation_id: uuid.UUID) -> bool:
    """Record that the user asked to stop the conversation's turn: the process running it sees it
    at its next renewal, and a process taking the turn over ends it instead of resuming it (so a
    cancel sent while no process runs the turn still wins). False when no turn holds the claim."""
    return bool(
        Conversation.objects.filter(id=conversation_id, active_turn_id__isnull=False).update(
            active_turn_cancelled=True
        )
    )


def claim_release(conversation_id: uuid.UUID, turn_id: uuid.UUID) -> None:
    """Give the conversation back, if ``turn_id`` still holds it (the only place a claim ends)."""
    Conversation.objects.filter(id=conversation_id, active_turn_id=turn_id).update(**RELEASED)


# The claim's columns once released (what ``claim_release`` sets).
RELEASED: dict[str, object] = {
    "active_turn_id": None,
    "active_turn_started_at": None,
    "active_turn_worker": "",
    "active_turn_text": "",
    "active_turn_shown": {},
    "active_turn_lease_until": None,
    "active_turn_cancelled": False,
}

# How often a turn tries to give its conversation back when the database is busy.
RELEASE_ATTEMPTS = 3


async def claim_release_retrying(turn: Turn) -> None:
    """Release the conversation's claim, retrying while the database is busy.

    A claim left behind would be taken over as a dead process's turn once its lease lapses.
    """
    for attempt in range(1, RELEASE_ATTEMPTS + 1):
        try:
            await sync_to_async(claim_release)(turn.conversation.id, turn.turn_id)
            turn.released = True
            return
        except Exception as exc:
            if is_database_busy(exc) and attempt < RELEASE_ATTEMPTS:
                continue
            log.exception("releasing conversation %s failed; the claim expires on its own", turn.key)
            return


def _progress_save(turn: Turn, text: str | None, shown: dict[str, object]) -> None:
    try:
        if turn.run_id is not None and text is not None:
            agent_run_text_keep(run_id=turn.run_id, text=text)
        held = Conversation.objects.filter(
            id=turn.conversation.id, active_turn_id=turn.turn_id, active_turn_worker=worker_name()
        )
        if turn.run_id is not None or text is None:
            held.update(active_turn_shown=shown)
        else:
            held.update(active_turn_text=text, active_turn_shown=shown)
    finally:
        release_connections()


async def turn_progress_save(turn: Turn, text: str | None, shown: dict[str, object]) -> None:
    """Keep what the turn has streamed so far (on its agent run, or on a plain turn's claim; None:
    what it kept last) and where its frames are (``shown``, on the claim: only while this process
    holds it).

    On a thread of the default pool, as the lease's renewal: the turn's own thread may be busy
    with a long call while its text pauses, which is when its progress must be saved."""
    await sync_to_async(_progress_save, thread_sensitive=False)(turn, text, shown)

"""The turn service: one user message becomes a streamed, persisted turn, for every transport.

``turn_start`` validates the request, resolves or creates the conversation, persists the user
message and claims the conversation, all before anything streams (so a bad request answers
400 and leaves nothing behind). The turn then runs as its own task and publishes typed frames
to the frame bus; transports subscribe to the bus and only translate frames to their medium.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from dataclasses import dataclass
from datetime import timedelta

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from apps.agents.history import DEFAULT_HISTORY_LIMIT
from apps.agents.llm.base import Provider
from apps.agents.llm.resolve import effective_model_name
from apps.agents.selectors import agent_definition_check_usable, agent_definition_for_conversation
from apps.agents.services import worker_name
from apps.chat import selectors
from apps.chat.agent_turn import run_agent_turn
from apps.chat.bus import get_bus
from apps.chat.citations import KnownEntities
from apps.chat.context import to_history
from apps.chat.frames import DoneFrame, ErrorFrame, MetaFrame
from apps.chat.models import Conversation, Message, MessageRole
from apps.chat.plain_turn import run_plain_turn
from apps.chat.turn import ConversationDeleted, Turn, emit
from apps.projects.db import ConnectionReleasingExecutor, is_database_busy, raise_if_busy, release_connections
from apps.projects.errors import ServiceError
from apps.projects.selectors import Principal, parse_uuid, project_get

log = logging.getLogger("kgchat.chat")

# A claim older than this is taken to belong to a turn whose process died.
STALE_TURN = timedelta(minutes=15)


class InvalidMessage(ServiceError):
    """invalid message"""

    code = "invalid_request"


class RateLimited(ServiceError):
    """too many turns"""

    status = 429
    code = "rate_limited"


class TurnInProgress(ServiceError):
    """a turn is already running in this conversation"""

    status = 409
    code = "turn_in_progress"


# --- conversations ---------------------------------------------------------------------------


def conversation_rename(*, principal: Principal, conversation_id: object, title: str) -> Conversation:
    conversation = selectors.conversation_get(principal=principal, conversation_id=conversation_id)
    title = (title or "").strip()
    if not title or len(title) > 200:
        raise InvalidMessage("title must be 1 to 200 characters")
    Conversation.objects.filter(id=conversation.id).update(title=title, updated_at=timezone.now())
    conversation.refresh_from_db()
    return conversation


def _delete(conversation_id: uuid.UUID) -> bool:
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(id=conversation_id)
        running = conversation.active_turn_id is not None
        conversation.delete()
    return running


async def conversation_delete(*, principal: Principal, conversation_id: object) -> None:
    """Delete one of my conversations with its messages, at once, even while a turn runs in it.

    The running turn (in whichever process) is cancelled: it ends with an ``error`` frame of code
    ``conversation_deleted`` and ``done``, stores nothing, and its run is ``cancelled``.
    """
    conversation = await selectors.aconversation_get(principal=principal, conversation_id=conversation_id)
    if await sync_to_async(_delete)(conversation.id):
        await get_bus().cancel(str(conversation.id))


def _title_from(message: str) -> str:
    line = " ".join(message.split())
    return line if len(line) <= 60 else line[:59].rstrip() + "…"


# --- starting a turn -------------------------------------------------------------------------


@dataclass
class TurnHandle:
    """A started turn: subscribe to ``conversation_id`` on the bus to read its frames."""

    conversation_id: str
    turn_id: str
    user_message_id: str


def _validate_message(message: object) -> str:
    if not isinstance(message, str) or not message.strip():
        raise InvalidMessage("message must not be empty")
    limit = settings.KGCHAT_MAX_MESSAGE_CHARS
    if len(message) > limit:
        raise InvalidMessage(f"message is longer than {limit} characters", code="message_too_long")
    return message


def _claim(conversation_id: uuid.UUID, turn_id: uuid.UUID) -> bool:
    now = timezone.now()
    return (
        Conversation.objects.filter(id=conversation_id)
        .filter(Q(active_turn_id__isnull=True) | Q(active_turn_started_at__lt=now - STALE_TURN))
        .update(
            active_turn_id=turn_id,
            active_turn_started_at=now,
            active_turn_worker=worker_name(),
            active_turn_text="",
            updated_at=now,
        )
        == 1
    )


def _release(conversation_id: uuid.UUID, turn_id: uuid.UUID) -> None:
    Conversation.objects.filter(id=conversation_id, active_turn_id=turn_id).update(
        active_turn_id=None, active_turn_started_at=None, active_turn_worker="", active_turn_text=""
    )


# How often a turn tries to give its conversation back when the database is busy.
RELEASE_ATTEMPTS = 3


async def _release_claim(turn: Turn) -> None:
    """Release the conversation's claim, retrying while the database is busy.

    A claim left behind would refuse every message of the conversation (409) until it goes stale.
    """
    for attempt in range(1, RELEASE_ATTEMPTS + 1):
        try:
            await sync_to_async(_release)(turn.conversation.id, turn.turn_id)
            return
        except Exception as exc:
            if is_database_busy(exc) and attempt < RELEASE_ATTEMPTS:
                continue
            log.exception("releasing conversation %s failed; the claim expires on its own", turn.key)
            return


def _check_rate(principal: Principal) -> None:
    limit = settings.KGCHAT_TURNS_PER_MINUTE
    if limit <= 0:
        return
    since = timezone.now() - timedelta(minutes=1)
    recent = Message.objects.filter(
        role=MessageRole.USER, conversation__user_id=principal.user_id, created_at__gte=since
    ).count()
    if recent >= limit:
        raise RateLimited(f"at most {limit} messages a minute; try again shortly")


@sync_to_async
def _prepare(
    *,
    principal: Principal,
    message: str,
    project_id: object,
    conversation_id: object,
    agent_definition_id: object,
) -> Turn:
    try:
        return _prepare_turn(
            principal=principal,
            message=message,
            project_id=project_id,
            conversation_id=conversation_id,
            agent_definition_id=agent_definition_id,
        )
    except DatabaseError as exc:
        raise_if_busy(exc)
        raise
    finally:
        # The request that started the turn may stream its frames for minutes: it must not keep
        # a pooled connection meanwhile.
        release_connections()


def _prepare_turn(
    *,
    principal: Principal,
    message: str,
    project_id: object,
    conversation_id: object,
    agent_definition_id: object,
) -> Turn:
    turn_id = uuid.uuid4()
    _check_rate(principal)
    with transaction.atomic():
        if conversation_id:
            conversation = selectors.conversation_get(principal=principal, conversation_id=conversation_id)
            project = conversation.project
            definition = conversation.agent_definition
            if definition is not None:
                agent_definition_check_usable(principal=principal, definition=definition)
        else:
            if not project_id:
                raise InvalidMessage("projectId is required when conversationId is absent")
            project = project_get(principal=principal, project_ref=project_id)
            definition = (
                agent_definition_for_conversation(
                    principal=principal, project_id=project.id, definition_id=agent_definition_id
                )
                if agent_definition_id
                else None
            )
            conversation = Conversation.objects.create(
                project=project,
                user_id=principal.user_id,
                title=_title_from(message),
                agent_definition=definition,
            )
        if not _claim(conversation.id, turn_id):
            raise TurnInProgress("a turn is already running in this conversation; wait for it or cancel it")
        user_message = Message.objects.create(
            conversation=conversation, role=MessageRole.USER, content=message
        )
    model_name = definition.model_choice.name if definition is not None else settings.KGCHAT_CHAT_MODEL
    limit = max(1, definition.history_limit) if definition is not None else DEFAULT_HISTORY_LIMIT
    # One more than the window, so the agent's history window knows it cut the conversation.
    history = selectors.message_window(conversation_id=conversation.id, limit=limit + 1, before=user_message)
    return Turn(
        turn_id=turn_id,
        conversation=conversation,
        project=project,
        user_message=user_message,
        agent_definition=definition,
        run_id=uuid.uuid4() if definition is not None else None,
        model=effective_model_name(model_name),
        history=[to_history(m) for m in history],
        known=KnownEntities(conversation.known_entities),
    )


_tasks: set[asyncio.Task[None]] = set()


async def turn_start(
    *,
    principal: Principal,
    message: object,
    project_id: object = None,
    conversation_id: object = None,
    agent_definition_id: object = None,
    provider: Provider | None = None,
) -> TurnHandle:
    """Validate and persist the user's message, then run the turn as a task publishing frames.

    Raises ``ServiceError`` (400 invalid request or unknown agent definition, 404 conversation or
    project, 409 turn in progress or disabled agent definition) before anything is persisted or streamed.
    """
    text = _validate_message(message)
    try:
        await recover_once()
    except DatabaseError as exc:
        raise_if_busy(exc)
        raise
    if conversation_id and not parse_uuid(conversation_id):
        raise selectors.ConversationNotFound()
    turn = await _prepare(
        principal=principal,
        message=text,
        project_id=project_id,
        conversation_id=conversation_id,
        agent_definition_id=agent_definition_id,
    )
    conversation_key = str(turn.conversation.id)
    await turn.bus.begin(conversation_key, str(turn.turn_id))
    task = asyncio.create_task(_run_turn(turn, provider), name=f"turn {turn.turn_id}")
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return TurnHandle(
        conversation_id=conversation_key, turn_id=str(turn.turn_id), user_message_id=str(turn.user_message.id)
    )


async def turn_cancel(*, principal: Principal, conversation_id: object) -> bool:
    """Ask the running turn of one of my conversations to stop; False when none runs."""
    conversation = await selectors.aconversation_get(principal=principal, conversation_id=conversation_id)
    return await get_bus().cancel(str(conversation.id))


async def turn_wait_all() -> None:
    """Wait for every turn task of this process (tests, graceful shutdown)."""
    while _tasks:
        await asyncio.gather(*list(_tasks), return_exceptions=True)


# --- running a turn --------------------------------------------------------------------------


async def _run_turn(turn: Turn, provider: Provider | None) -> None:
    """Run a started turn to its end: meta, the branch's frames, then ``done``.

    The conversation is released before ``done`` is published, so a client may send its next
    message the moment it sees ``done``; the bus then marks the turn over.
    """
    cancel = turn.bus.cancel_signal(turn.key)

    def time_out() -> None:
        turn.timed_out = True
        cancel.set()

    watchdog = asyncio.get_running_loop().call_later(settings.KGCHAT_TURN_TIMEOUT_SECONDS, time_out)
    # The turn's database calls run on a thread of its own that gives its pooled connection back
    # after each call: a turn waiting on the model holds no connection.
    executor = ConnectionReleasingExecutor(name=f"turn-{turn.turn_id}")
    try:
        async with ThreadSensitiveContext(executor=executor):
            await _run_turn_body(turn, provider)
    finally:
        watchdog.cancel()
        executor.shutdown(wait=False)


async def _run_turn_body(turn: Turn, provider: Provider | None) -> DoneFrame:
    conversation_key = turn.key
    run_id = str(turn.run_id) if turn.run_id else None
    done = DoneFrame(messageId=None, runId=run_id)
    try:
        await emit(
            turn,
            MetaFrame(
                conversationId=conversation_key,
                messageId=str(turn.user_message.id),
                agentDefinitionId=str(turn.agent_definition.id) if turn.agent_definition else None,
                runId=run_id,
                model=turn.model,
            ),
        )
        if turn.agent_definition is not None:
            done = await run_agent_turn(turn, provider)
        else:
            done = await run_plain_turn(turn, provider)
    except ConversationDeleted:
        if not turn.deleted:
            turn.deleted = True
            await emit(turn, ErrorFrame(error="the conversation was deleted", code="conversation_deleted"))
        done = DoneFrame(messageId=None, runId=run_id)
    except Exception as exc:
        if is_database_busy(exc):
            log.warning("turn %s of conversation %s: database busy (%s)", turn.turn_id, conversation_key, exc)
            await emit(
                turn, ErrorFrame(error="the database is busy; try again shortly", code="database_busy")
            )
        else:
            log.exception("turn %s of conversation %s failed", turn.turn_id, conversation_key)
            await emit(turn, ErrorFrame(error="the turn failed unexpectedly", code="internal_error"))
        done = DoneFrame(messageId=None, runId=run_id)
    finally:
        if not turn.released:
            await _release_claim(turn)
        try:
            await emit(turn, done)
        finally:
            await turn.bus.finish(conversation_key)
    return done


# --- crash recovery --------------------------------------------------------------------------

_recovered = False
_recovery_lock = threading.Lock()


def _recover_once_sync() -> None:
    global _recovered
    try:
        with _recovery_lock:
            if not _recovered:
                from apps.chat.recovery import interrupted_turns_recover

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

"""The turn service: one user message becomes a streamed, persisted turn, for every transport.

``turn_start`` validates the request, resolves or creates the conversation, persists the user
message and claims the conversation, all before anything streams (so a bad request answers
400 and leaves nothing behind). The turn then runs as its own task and publishes typed frames
to the frame bus; transports subscribe to the bus and only translate frames to their medium.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.agents.definitions import agent_definition_for_project
from apps.agents.llm.base import (
    Done,
    ErrorEvent,
    GenerationConfig,
    LLMError,
    Provider,
    TextDelta,
    ToolCall,
)
from apps.agents.llm.resolve import effective_model_name, resolve_model
from apps.agents.models import AgentDefinition
from apps.chat import selectors
from apps.chat.bus import CANCELLED, FrameBus, get_bus, until_cancelled
from apps.chat.citations import CitationFilter, KnownEntities
from apps.chat.context import FullHistoryContextStrategy, load_prompt, to_history
from apps.chat.frames import AnyFrame, DoneFrame, ErrorFrame, MetaFrame, TokenFrame
from apps.chat.models import Conversation, Message, MessageRole
from apps.chat.retrieval import AlwaysRetrieveStrategy
from apps.graph_tools.registry import ToolError
from apps.projects.errors import ServiceError
from apps.projects.models import Project
from apps.projects.selectors import Principal, parse_uuid, project_get

log = logging.getLogger("kgchat.chat")

DEFAULT_HISTORY_LIMIT = 10
# A claim older than this is taken to belong to a turn whose process died.
STALE_TURN = timedelta(minutes=15)
WORKER = f"{socket.gethostname()}:{os.getpid()}"


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


def conversation_delete(*, principal: Principal, conversation_id: object) -> None:
    conversation = selectors.conversation_get(principal=principal, conversation_id=conversation_id)
    conversation.delete()


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


@dataclass
class _Turn:
    turn_id: uuid.UUID
    conversation: Conversation
    project: Project
    user_message: Message
    agent_definition: AgentDefinition | None
    run_id: uuid.UUID | None
    model: str
    seq: int = 0
    bus: FrameBus = field(default_factory=get_bus)
    timed_out: bool = False


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
        .update(active_turn_id=turn_id, active_turn_started_at=now, active_turn_worker=WORKER, updated_at=now)
        == 1
    )


def _release(conversation_id: uuid.UUID, turn_id: uuid.UUID) -> None:
    Conversation.objects.filter(id=conversation_id, active_turn_id=turn_id).update(
        active_turn_id=None, active_turn_started_at=None, active_turn_worker=""
    )


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
) -> _Turn:
    turn_id = uuid.uuid4()
    _check_rate(principal)
    with transaction.atomic():
        if conversation_id:
            conversation = selectors.conversation_get(principal=principal, conversation_id=conversation_id)
            project = conversation.project
            definition = conversation.agent_definition
        else:
            if not project_id:
                raise InvalidMessage("projectId is required when conversationId is absent")
            project = project_get(principal=principal, project_ref=project_id)
            definition = (
                agent_definition_for_project(project_id=project.id, definition_id=agent_definition_id)
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
    model_name = definition.model.get("name", "") if definition is not None else settings.KGCHAT_CHAT_MODEL
    return _Turn(
        turn_id=turn_id,
        conversation=conversation,
        project=project,
        user_message=user_message,
        agent_definition=definition,
        run_id=uuid.uuid4() if definition is not None else None,
        model=effective_model_name(model_name),
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
    project, 409 turn in progress) before anything is persisted or streamed.
    """
    text = _validate_message(message)
    await recover_once()
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


async def _emit(turn: _Turn, frame: AnyFrame) -> None:
    if turn.timed_out and isinstance(frame, ErrorFrame) and frame.code == "cancelled":
        frame = ErrorFrame(
            error=f"the turn took longer than {settings.KGCHAT_TURN_TIMEOUT_SECONDS} s and was stopped",
            code="timeout",
        )
    turn.seq += 1
    frame.seq = turn.seq
    await turn.bus.publish(str(turn.conversation.id), frame)


async def _known_entities(conversation_id: uuid.UUID) -> KnownEntities:
    """Entities tools returned earlier in this conversation (for checking citations)."""
    known = KnownEntities()
    async for row in Message.objects.filter(conversation_id=conversation_id).values(
        "tool_calls", "retrieval_context", "citations"
    ):
        for call in row["tool_calls"] or []:
            known.add_result(call.get("output"))
        context = row["retrieval_context"] or {}
        known.add_result(context.get("entities"))
        known.add_citations(row["citations"] or [])
    return known


async def _persist_assistant(
    turn: _Turn,
    *,
    content: str,
    retrieval_context: dict[str, Any],
    citations: list[Any],
    extra: list[Message],
) -> Message:
    @sync_to_async
    def write() -> Message:
        with transaction.atomic():
            now = timezone.now()
            for offset, row in enumerate(extra):
                row.created_at = now + timedelta(microseconds=offset)
                row.save(force_insert=True)
            message = Message.objects.create(
                conversation=turn.conversation,
                role=MessageRole.ASSISTANT,
                content=content,
                retrieval_context=retrieval_context,
                citations=[c.model_dump() for c in citations],
                created_at=now + timedelta(microseconds=len(extra)),
            )
            Conversation.objects.filter(id=turn.conversation.id).update(updated_at=timezone.now())
            return message

    return await write()


async def _run_turn(turn: _Turn, provider: Provider | None) -> None:
    conversation_key = str(turn.conversation.id)
    cancel = turn.bus.cancel_signal(conversation_key)

    def time_out() -> None:
        turn.timed_out = True
        cancel.set()

    watchdog = asyncio.get_running_loop().call_later(settings.KGCHAT_TURN_TIMEOUT_SECONDS, time_out)
    try:
        await _emit(
            turn,
            MetaFrame(
                conversationId=conversation_key,
                messageId=str(turn.user_message.id),
                agentDefinitionId=str(turn.agent_definition.id) if turn.agent_definition else None,
                runId=str(turn.run_id) if turn.run_id else None,
                model=turn.model,
            ),
        )
        if turn.agent_definition is not None:
            from apps.chat.agent_turn import run_agent_turn

            await run_agent_turn(turn, provider, emit=lambda f: _emit(turn, f))
        else:
            await _run_plain_turn(turn, provider)
    except Exception:
        log.exception("turn %s of conversation %s failed", turn.turn_id, conversation_key)
        await _emit(turn, ErrorFrame(error="the turn failed unexpectedly", code="internal_error"))
        await _emit(turn, DoneFrame(messageId=None, runId=str(turn.run_id) if turn.run_id else None))
    finally:
        watchdog.cancel()
        try:
            await sync_to_async(_release)(turn.conversation.id, turn.turn_id)
        finally:
            await turn.bus.finish(conversation_key)


async def _history_before(turn: _Turn, limit: int) -> list[Any]:
    rows = await selectors.message_history(
        conversation_id=turn.conversation.id, limit=limit, before=turn.user_message
    )
    return [to_history(m) for m in rows]


async def _run_plain_turn(turn: _Turn, provider: Provider | None) -> None:
    """Always retrieve: one hybrid search, its results in the system prompt, one streamed answer."""
    cancel = turn.bus.cancel_signal(str(turn.conversation.id))
    strategy = AlwaysRetrieveStrategy()
    try:
        retrieval = await strategy.retrieve(project_id=turn.project.id, query=turn.user_message.content)
    except ToolError as exc:
        await _emit(turn, ErrorFrame(error=f"retrieval failed: {exc.message}", code="retrieval_error"))
        await _emit(turn, DoneFrame(messageId=None, runId=None))
        return
    first = retrieval.entities[0] if retrieval.entities else None
    system_prompt = load_prompt().format(
        project_name=turn.project.name,
        context=retrieval.context,
        example_name=first["name"] if first else "Name",
        example_id=first["id"] if first else "<id>",
    )
    history = await _history_before(turn, DEFAULT_HISTORY_LIMIT)
    messages = FullHistoryContextStrategy(max_messages=DEFAULT_HISTORY_LIMIT).build_context(
        [*history, to_history(turn.user_message)], system_prompt
    )

    known = await _known_entities(turn.conversation.id)
    known.add_result(retrieval.result)
    citations = CitationFilter(known)
    parts: list[str] = []
    failure: str | None = None
    cancelled = False

    async def send(text: str) -> None:
        if text:
            parts.append(text)
            await _emit(turn, TokenFrame(token=text))

    try:
        llm = provider or resolve_model(turn.model)
        config = GenerationConfig(model=turn.model, temperature=0.2, stream=True)
        stream = llm.stream(messages, strategy.build_tool_definitions(), config)
        async for event in until_cancelled(stream, cancel):
            if event is CANCELLED:
                cancelled = True
                break
            if isinstance(event, TextDelta):
                await send(citations.feed(event.text))
            elif isinstance(event, ErrorEvent):
                failure = event.error
                break
            elif isinstance(event, Done | ToolCall):
                continue
    except LLMError as exc:
        failure = str(exc)

    if failure is not None:
        await _emit(turn, ErrorFrame(error=f"the model failed: {failure}", code="llm_error"))
        await _emit(turn, DoneFrame(messageId=None, runId=None))
        return
    await send(citations.flush())
    text = "".join(parts)
    stop_reason = "timeout" if turn.timed_out else "cancelled"
    if cancelled:
        await _emit(turn, ErrorFrame(error="the turn was cancelled", code="cancelled"))
        if not text:
            await _emit(turn, DoneFrame(messageId=None, runId=None))
            return
    context: dict[str, Any] = {
        "strategy": "always_retrieve",
        "model": turn.model,
        "entity_ids": [e["id"] for e in retrieval.entities],
        "entities": [{k: e[k] for k in ("id", "key", "type", "name")} for e in retrieval.entities],
    }
    if cancelled:
        context["stop_reason"] = stop_reason
    message = await _persist_assistant(
        turn, content=text, retrieval_context=context, citations=citations.citations, extra=[]
    )
    await _emit(turn, DoneFrame(messageId=str(message.id), runId=None, citations=citations.citations))


def frame_json(frame: AnyFrame) -> str:
    return json.dumps(frame.wire(), ensure_ascii=False)


# --- crash recovery --------------------------------------------------------------------------

_recovered = False


async def recover_once() -> None:
    """Recover turns orphaned by dead processes, once per process (before its first turn)."""
    global _recovered
    if not _recovered:
        _recovered = True
        from apps.chat.recovery import interrupted_turns_recover

        await sync_to_async(interrupted_turns_recover)()

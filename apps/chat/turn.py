"""A turn in progress: its state, and what both branches do with it (frames, history, persistence)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models.expressions import RawSQL
from django.utils import timezone

from apps.agents.history import HistoryMessage
from apps.agents.models import AgentDefinition
from apps.chat.bus import FrameBus, get_bus
from apps.chat.citations import KnownEntities
from apps.chat.frames import AnyFrame, Citation, ErrorFrame
from apps.chat.models import Conversation, Message, MessageRole
from apps.projects.inputs import storable
from apps.projects.models import Project


class ConversationDeleted(Exception):
    """The conversation was deleted while its turn ran: the turn stops and stores nothing."""


@dataclass
class Turn:
    """Everything a running turn needs; built by the turn service once the request is accepted."""

    turn_id: uuid.UUID
    conversation: Conversation
    project: Project
    user_message: Message
    agent_definition: AgentDefinition | None
    run_id: uuid.UUID | None
    model: str
    history: list[HistoryMessage] = field(default_factory=list)
    known: KnownEntities = field(default_factory=KnownEntities)
    seq: int = 0
    bus: FrameBus = field(default_factory=get_bus)
    timed_out: bool = False
    released: bool = False
    deleted: bool = False

    @property
    def key(self) -> str:
        """The conversation id as the frame bus knows it."""
        return str(self.conversation.id)


class PartialTextSaver:
    """Save the text a turn has streamed now and then, so a crash does not lose what was shown.

    ``save`` stores the text given (agent turns: on their run; plain turns: on the conversation's
    claim); recovery turns it into the interrupted answer (apps/chat/recovery.py).
    """

    def __init__(self, save: Callable[[str], Awaitable[object]], every_seconds: float = 1.0) -> None:
        self.save = save
        self.every = every_seconds
        self.last = time.monotonic()

    async def maybe_save(self, parts: list[str]) -> None:
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            await self.save(storable("".join(parts)))  # a model's NUL or lone surrogate, as U+FFFD


async def save_claim_text(turn: Turn, text: str) -> None:
    """Store ``text`` as what the turn holding the conversation's claim has streamed so far."""
    await Conversation.objects.filter(id=turn.conversation.id, active_turn_id=turn.turn_id).aupdate(
        active_turn_text=text
    )


async def emit(turn: Turn, frame: AnyFrame) -> None:
    """Number ``frame`` and publish it.

    A cancellation is reported as what caused it: ``conversation_deleted`` when the conversation
    is gone (deleting it cancels its turn), ``timeout`` when the turn ran out of time.
    """
    if isinstance(frame, ErrorFrame) and frame.code == "cancelled" and not turn.deleted:
        turn.deleted = not await Conversation.objects.filter(id=turn.conversation.id).aexists()
        if turn.deleted:
            frame = ErrorFrame(error="the conversation was deleted", code="conversation_deleted")
    if turn.timed_out and isinstance(frame, ErrorFrame) and frame.code == "cancelled":
        frame = ErrorFrame(
            error=f"the turn took longer than {settings.KGCHAT_TURN_TIMEOUT_SECONDS} s and was stopped",
            code="timeout",
        )
    turn.seq += 1
    frame.seq = turn.seq
    await turn.bus.publish(str(turn.conversation.id), frame)


async def persist_answer(
    turn: Turn,
    *,
    content: str,
    retrieval_context: dict[str, Any],
    citations: list[Citation],
    extra: list[Message],
) -> Message:
    """Store the turn's tool rows and answer in one transaction, with what the turn learnt.

    The same transaction merges the entities tools returned into the conversation's known
    entities and releases the conversation, so the next message may follow ``done`` at once.
    Raises ``ConversationDeleted`` (nothing written) when the conversation is gone.
    """
    if turn.deleted:
        raise ConversationDeleted()

    @sync_to_async
    def write() -> Message:
        with transaction.atomic():
            now = timezone.now()
            for offset, row in enumerate(extra):
                row.created_at = now + timedelta(microseconds=offset)
                # What the model wrote or passed to a tool may hold NUL or lone surrogates.
                row.content, row.tool_calls = storable(row.content), storable(row.tool_calls)
                row.save(force_insert=True)
            message = Message.objects.create(
                conversation=turn.conversation,
                role=MessageRole.ASSISTANT,
                content=storable(content),
                retrieval_context=retrieval_context,
                citations=[c.model_dump() for c in citations],
                created_at=now + timedelta(microseconds=len(extra)),
            )
            Conversation.objects.filter(id=turn.conversation.id).update(
                updated_at=timezone.now(),
                known_entities=RawSQL("known_entities || %s::jsonb", [json.dumps(turn.known.new)]),
            )
            Conversation.objects.filter(id=turn.conversation.id, active_turn_id=turn.turn_id).update(
                active_turn_id=None, active_turn_started_at=None, active_turn_worker="", active_turn_text=""
            )
            return message

    try:
        message = await write()
    except IntegrityError:
        # Deleted between the cancel check and this write: its rows may no longer refer to it.
        if await Conversation.objects.filter(id=turn.conversation.id).aexists():
            raise
        raise ConversationDeleted() from None
    turn.released = True
    return message

"""A turn in progress: its state, and what both branches do with it (frames, history, persistence)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.agents.history import HistoryMessage
from apps.agents.models import AgentDefinition
from apps.chat import selectors
from apps.chat.bus import FrameBus, get_bus
from apps.chat.citations import KnownEntities
from apps.chat.context import to_history
from apps.chat.frames import AnyFrame, Citation, ErrorFrame
from apps.chat.models import Conversation, Message, MessageRole
from apps.projects.models import Project


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
    seq: int = 0
    bus: FrameBus = field(default_factory=get_bus)
    timed_out: bool = False

    @property
    def key(self) -> str:
        """The conversation id as the frame bus knows it."""
        return str(self.conversation.id)


async def emit(turn: Turn, frame: AnyFrame) -> None:
    """Number ``frame`` and publish it (a cancellation caused by the timeout is reported as ``timeout``)."""
    if turn.timed_out and isinstance(frame, ErrorFrame) and frame.code == "cancelled":
        frame = ErrorFrame(
            error=f"the turn took longer than {settings.KGCHAT_TURN_TIMEOUT_SECONDS} s and was stopped",
            code="timeout",
        )
    turn.seq += 1
    frame.seq = turn.seq
    await turn.bus.publish(str(turn.conversation.id), frame)


async def known_entities(conversation_id: uuid.UUID) -> KnownEntities:
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


async def persist_answer(
    turn: Turn,
    *,
    content: str,
    retrieval_context: dict[str, Any],
    citations: list[Citation],
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


async def history_before(turn: Turn, limit: int) -> list[HistoryMessage]:
    """The newest ``limit`` messages before this turn's user message, oldest first."""
    rows = await selectors.message_history(
        conversation_id=turn.conversation.id, limit=limit, before=turn.user_message
    )
    return [to_history(m) for m in rows]

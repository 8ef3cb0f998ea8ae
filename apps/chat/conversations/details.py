"""One of my conversations read alone: its messages with my feedback and each answer's usage, and its totals."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from apps.chat.conversations.feedback import feedback_mine
from apps.chat.conversations.usage import Usage, answer_usage, conversation_usage
from apps.chat.models import Conversation, Message, MessageFeedback
from apps.chat.selectors import conversation_get, message_list
from apps.projects.selectors import Principal


@dataclass(frozen=True)
class ConversationDetail:
    conversation: Conversation
    messages: list[Message]
    feedback: dict[uuid.UUID, MessageFeedback]  # mine, by message id
    usage: dict[uuid.UUID, Usage]  # agent answers, by message id
    total: Usage


def conversation_detail(*, principal: Principal, conversation_id: object) -> ConversationDetail:
    """Read one of my conversations with what the REST output adds to its messages."""
    conversation = conversation_get(principal=principal, conversation_id=conversation_id)
    messages = list(message_list(conversation=conversation))
    return ConversationDetail(
        conversation=conversation,
        messages=messages,
        feedback=feedback_mine(principal=principal, message_ids=[m.id for m in messages]),
        usage=answer_usage(messages=messages),
        total=conversation_usage(conversation=conversation),
    )

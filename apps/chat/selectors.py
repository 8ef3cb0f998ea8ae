"""Reads of conversations and messages, always scoped to their owner."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from apps.agents.models import AgentRun
from apps.chat.models import Conversation, Message
from apps.projects.errors import NotFound
from apps.projects.selectors import Principal, parse_uuid, project_list


class ConversationNotFound(NotFound):
    """conversation not found"""

    code = "conversation_not_found"


def conversation_list(*, principal: Principal, project_id: uuid.UUID | None = None) -> QuerySet[Conversation]:
    """My conversations in projects I can reach, newest first."""
    qs = Conversation.objects.filter(user_id=principal.user_id, project__in=project_list(principal=principal))
    if project_id is not None:
        qs = qs.filter(project_id=project_id)
    return qs.order_by("-updated_at", "-created_at")


def conversation_get(*, principal: Principal, conversation_id: object) -> Conversation:
    """Return one of my conversations; anyone else's (or a malformed id) is ``ConversationNotFound``."""
    cid = parse_uuid(conversation_id)
    conversation = (
        conversation_list(principal=principal).select_related("agent_definition").filter(id=cid).first()
        if cid
        else None
    )
    if conversation is None:
        raise ConversationNotFound()
    return conversation


async def aconversation_get(*, principal: Principal, conversation_id: object) -> Conversation:
    cid = parse_uuid(conversation_id)
    conversation = (
        await conversation_list(principal=principal)
        .select_related("agent_definition")
        .filter(id=cid)
        .afirst()
        if cid
        else None
    )
    if conversation is None:
        raise ConversationNotFound()
    return conversation


def message_list(*, conversation: Conversation) -> QuerySet[Message]:
    return Message.objects.filter(conversation=conversation).order_by("created_at", "id")


def message_window(*, conversation_id: uuid.UUID, limit: int, before: Message | None = None) -> list[Message]:
    """The newest ``limit`` messages of a conversation (older than ``before``), oldest first."""
    qs = Message.objects.filter(conversation_id=conversation_id)
    if before is not None:
        qs = qs.filter(created_at__lt=before.created_at)
    rows = list(qs.order_by("-created_at", "-id")[:limit])
    rows.reverse()
    return rows


class AgentRunNotFound(NotFound):
    """agent run not found"""

    code = "agent_run_not_found"


def agent_run_get(*, principal: Principal, run_id: object) -> AgentRun:
    """A run of my projects; a run of a conversation is visible to that conversation's owner only."""
    rid = parse_uuid(run_id)
    run = (
        AgentRun.objects.filter(id=rid, project__in=project_list(principal=principal))
        .prefetch_related("messages", "tool_calls")
        .first()
        if rid
        else None
    )
    if run is None:
        raise AgentRunNotFound()
    if (
        run.conversation_id is not None
        and not Conversation.objects.filter(id=run.conversation_id, user_id=principal.user_id).exists()
    ):
        raise AgentRunNotFound()
    return run

"""Read-only share links to a conversation (PROTOCOL §2 "shares", page ``/share/<token>``).

A link shows the conversation to logged-in members of its project; it never lets anyone continue
it. Only a SHA-256 of the token is stored, so a link is shown once, when it is made. A wrong,
expired or revoked token, a caller outside the project, or a conversation whose owner has left the
project (their conversations are hidden there) all answer ``ShareNotFound``.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from apps.chat.conversations.feedback import feedback_mine
from apps.chat.conversations.usage import Usage, answer_usage
from apps.chat.models import Conversation, ConversationShare, Message, MessageFeedback
from apps.chat.selectors import conversation_get, message_list
from apps.core.errors import NotFound, ServiceError
from apps.core.inputs import input_problem
from apps.projects.models import ProjectMembership
from apps.projects.selectors import Principal, parse_uuid, project_list, token_hash

SHARE_TOKEN_BYTES = 32
MAX_SHARE_TOKEN_CHARS = 200
MAX_ACTIVE_SHARES = 100
MAX_SHARE_HOURS = 8760


class ShareNotFound(NotFound):
    """share not found"""

    code = "share_not_found"


class TooManyShares(ServiceError):
    """this conversation has too many active share links: revoke some first"""

    status = 409
    code = "too_many_shares"


class InvalidShare(ServiceError):
    """invalid share"""

    code = "invalid_request"


def share_create(
    *, principal: Principal, conversation_id: object, expires_in_hours: int | None = None
) -> tuple[ConversationShare, str]:
    """Make a share link to one of my conversations; return it and its token (shown this once)."""
    if expires_in_hours is not None and not 1 <= expires_in_hours <= MAX_SHARE_HOURS:
        raise InvalidShare(f"expiresInHours must be between 1 and {MAX_SHARE_HOURS}")
    conversation = conversation_get(principal=principal, conversation_id=conversation_id)
    now = timezone.now()
    token = secrets.token_urlsafe(SHARE_TOKEN_BYTES)
    with transaction.atomic():
        # Lock the conversation so two requests cannot both pass the cap.
        Conversation.objects.select_for_update().filter(id=conversation.id).first()
        if share_active(conversation.shares.all(), now=now).count() >= MAX_ACTIVE_SHARES:
            raise TooManyShares()
        share = ConversationShare.objects.create(
            conversation=conversation,
            created_by=principal.user,
            token_hash=token_hash(token),
            created_at=now,
            expires_at=now + timedelta(hours=expires_in_hours) if expires_in_hours else None,
        )
    return share, token


def share_active(qs: QuerySet[ConversationShare], *, now: datetime) -> QuerySet[ConversationShare]:
    """The shares of ``qs`` that are neither revoked nor expired at ``now``."""
    return qs.filter(revoked_at__isnull=True).exclude(expires_at__lte=now)


def share_list(*, principal: Principal, conversation_id: object) -> QuerySet[ConversationShare]:
    """The share links of one of my conversations, newest first (never their tokens)."""
    conversation = conversation_get(principal=principal, conversation_id=conversation_id)
    return ConversationShare.objects.filter(conversation=conversation).order_by("-created_at", "id")


def share_revoke(*, principal: Principal, conversation_id: object, share_id: object) -> None:
    """Revoke a share link of one of my conversations (revoking it again changes nothing)."""
    conversation = conversation_get(principal=principal, conversation_id=conversation_id)
    sid = parse_uuid(share_id)
    share = ConversationShare.objects.filter(conversation=conversation, id=sid).first() if sid else None
    if share is None:
        raise ShareNotFound()
    if share.revoked_at is None:
        ConversationShare.objects.filter(id=share.id, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )


def shared_conversation_get(
    *, principal: Principal, token: object, now: datetime | None = None
) -> tuple[ConversationShare, Conversation]:
    """The active share ``token`` names and its conversation, when the caller is a member of its project."""
    if not isinstance(token, str) or not token or len(token) > MAX_SHARE_TOKEN_CHARS:
        raise ShareNotFound()
    if input_problem(token) is not None:
        raise ShareNotFound()
    share = (
        ConversationShare.objects.select_related("conversation", "conversation__project", "created_by")
        .filter(token_hash=token_hash(token))
        .first()
    )
    if share is None or share.status_at(now or timezone.now()) != "active":
        raise ShareNotFound()
    conversation = share.conversation
    if not project_list(principal=principal).filter(id=conversation.project_id).exists():
        raise ShareNotFound()
    if not ProjectMembership.objects.filter(
        project_id=conversation.project_id, user_id=conversation.user_id
    ).exists():
        raise ShareNotFound()
    return share, conversation


@dataclass(frozen=True)
class SharedConversation:
    share: ConversationShare
    conversation: Conversation
    messages: list[Message]
    feedback: dict[uuid.UUID, MessageFeedback]  # the caller's own, by message id
    usage: dict[uuid.UUID, Usage]  # agent answers, by message id


def shared_conversation_detail(*, principal: Principal, token: object) -> SharedConversation:
    """What a share link shows the caller: the conversation, its messages and the caller's own feedback."""
    share, conversation = shared_conversation_get(principal=principal, token=token)
    messages = list(message_list(conversation=conversation))
    feedback = feedback_mine(principal=principal, message_ids=[m.id for m in messages])
    return SharedConversation(
        share=share,
        conversation=conversation,
        messages=messages,
        feedback=feedback,
        usage=answer_usage(messages=messages),
    )

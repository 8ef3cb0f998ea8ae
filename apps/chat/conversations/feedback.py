"""Thumbs up/down (and a comment) on assistant answers, one per user per answer (PROTOCOL §2 "feedback").

An answer takes feedback from whoever may see its conversation: its owner, and the project's
members while an active share link shows it to them. The feedback keeps the answer's agent run, so
the admin can filter by agent definition and model and open the run's trace.
"""

from __future__ import annotations

import uuid

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from apps.agents.models import AgentRun
from apps.chat.models import Conversation, ConversationShare, Message, MessageFeedback, MessageRole, Rating
from apps.core.errors import NotFound, ServiceError
from apps.core.inputs import input_check
from apps.projects.models import ProjectMembership
from apps.projects.selectors import Principal, parse_uuid, project_list

MAX_COMMENT_CHARS = 10_000


class MessageNotFound(NotFound):
    """message not found"""

    code = "message_not_found"


class NotAnAnswer(ServiceError):
    """feedback is only for assistant answers"""

    code = "not_an_answer"


class InvalidFeedback(ServiceError):
    """invalid feedback"""

    code = "invalid_request"


def conversations_visible(*, principal: Principal) -> Q:
    """Conversations the caller may read: their own, and ones shared (actively) in their projects."""
    now = timezone.now()
    active_share = ConversationShare.objects.filter(
        conversation=OuterRef("pk"), revoked_at__isnull=True
    ).exclude(expires_at__lte=now)
    owner_still_member = ProjectMembership.objects.filter(project=OuterRef("project"), user=OuterRef("user"))
    projects = project_list(principal=principal)
    mine = Q(user_id=principal.user_id)
    shared = Q(Exists(active_share)) & Q(Exists(owner_still_member))
    return Q(project__in=projects) & (mine | shared)


def message_visible_get(*, principal: Principal, message_id: object) -> Message:
    """A message of a conversation the caller may read; anything else is ``MessageNotFound``."""
    mid = parse_uuid(message_id)
    visible = Conversation.objects.filter(conversations_visible(principal=principal))
    message = (
        Message.objects.filter(id=mid, conversation__in=visible).select_related("conversation").first()
        if mid
        else None
    )
    if message is None:
        raise MessageNotFound()
    return message


def _answer_get(*, principal: Principal, message_id: object) -> Message:
    message = message_visible_get(principal=principal, message_id=message_id)
    if message.role != MessageRole.ASSISTANT or not message.content:
        raise NotAnAnswer()
    return message


def feedback_set(
    *, principal: Principal, message_id: object, rating: str, comment: str = ""
) -> MessageFeedback:
    """Set (or replace) the caller's feedback on an answer."""
    if rating not in Rating.values:
        raise InvalidFeedback("rating must be 'up' or 'down'")
    input_check(comment, field="comment")
    if len(comment) > MAX_COMMENT_CHARS:
        raise InvalidFeedback(f"comment is longer than {MAX_COMMENT_CHARS} characters")
    message = _answer_get(principal=principal, message_id=message_id)
    context = message.retrieval_context if isinstance(message.retrieval_context, dict) else {}
    run_id = parse_uuid(context.get("agent_run_id"))
    if run_id is not None and not AgentRun.objects.filter(id=run_id).exists():
        run_id = None
    values = {"rating": rating, "comment": comment.strip(), "agent_run_id": run_id}
    for attempt in (1, 2):
        now = timezone.now()
        try:
            with transaction.atomic():
                feedback, _ = MessageFeedback.objects.update_or_create(
                    message=message,
                    user_id=principal.user_id,
                    defaults={**values, "updated_at": now},
                    create_defaults={**values, "created_at": now, "updated_at": now},
                )
            break
        except IntegrityError:
            # Another request of this user created it first: the second attempt updates that row.
            if attempt == 2:
                raise
    return feedback


def feedback_clear(*, principal: Principal, message_id: object) -> None:
    """Remove the caller's feedback on an answer (none: no change)."""
    message = _answer_get(principal=principal, message_id=message_id)
    MessageFeedback.objects.filter(message=message, user_id=principal.user_id).delete()


def feedback_mine(*, principal: Principal, message_ids: list[uuid.UUID]) -> dict[uuid.UUID, MessageFeedback]:
    """The caller's own feedback on these messages, by message id."""
    rows = MessageFeedback.objects.filter(user_id=principal.user_id, message_id__in=message_ids)
    return {f.message_id: f for f in rows}

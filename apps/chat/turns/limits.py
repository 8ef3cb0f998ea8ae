"""What a message must keep to before it becomes a turn: its length and its sender's rate.

Checks the admission (``admission.turn_admit``) makes; each raises a ``ServiceError`` the
transports map. The rate is read with the turn's other reads where it can be (``rate_count``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import F, Func, IntegerField, QuerySet
from django.utils import timezone

from apps.chat.models import Message, MessageRole
from apps.core.errors import ServiceError
from apps.core.prepared import QueryTemplate
from apps.projects.selectors import Principal


class InvalidMessage(ServiceError):
    """invalid message"""

    code = "invalid_request"


class RateLimited(ServiceError):
    """too many turns"""

    status = 429
    code = "rate_limited"


def message_validate(message: object) -> str:
    """The message's text; ``InvalidMessage`` when it is empty or longer than the operator's limit."""
    if not isinstance(message, str) or not message.strip():
        raise InvalidMessage("message must not be empty")
    limit = settings.KGCHAT_MAX_MESSAGE_CHARS
    if len(message) > limit:
        raise InvalidMessage(f"message is longer than {limit} characters", code="message_too_long")
    return message


def rate_query(*, user_id: int, since: datetime) -> QuerySet[Message, Any]:
    """The messages the user sent since ``since``, counted (one value, ``n``)."""
    return (
        Message.objects.filter(role=MessageRole.USER, conversation__user_id=user_id, created_at__gte=since)
        .order_by()
        .values(n=Func(F("id"), function="COUNT", output_field=IntegerField()))
    )


_RATE = QueryTemplate(rate_query)


def rate_since() -> datetime | None:
    """Where the rate's minute starts; None when no limit is configured (nothing to count)."""
    if settings.KGCHAT_TURNS_PER_MINUTE <= 0:
        return None
    return timezone.now() - timedelta(minutes=1)


def rate_count(principal: Principal) -> tuple[str, list[Any]] | None:
    """How many messages the user sent in the last minute, as a one-value read for ``rows_write``
    (None: no limit configured, nothing to count)."""
    since = rate_since()
    return None if since is None else _RATE.sql_with_params(user_id=principal.user_id, since=since)


def rate_enforce(recent: int | None) -> None:
    """``RateLimited`` when the user sent ``KGCHAT_TURNS_PER_MINUTE`` messages in the last minute
    (``recent``, counted before this message by ``rate_count``)."""
    limit = settings.KGCHAT_TURNS_PER_MINUTE
    if limit > 0 and (recent or 0) >= limit:
        raise RateLimited(f"at most {limit} messages a minute; try again shortly")

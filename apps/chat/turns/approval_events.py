"""Graph changes a turn proposed and waits for: settling expired approvals when the next message
comes, announcing decisions to every socket watching the conversation, expiring them on time, and
finding the decided ones whose continuing turn never started (``recovery`` starts them)."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from apps.agents.models import AgentRun
from apps.chat.models import Conversation, Message, MessageRole
from apps.chat.streams.bus import get_bus
from apps.chat.streams.frames import ApprovalDecidedFrame
from apps.chat.turns.claim import lease_seconds
from apps.core.db import (
    release_connections,
)
from apps.core.errors import ServiceError
from apps.core.timeouts import call_later_bare
from apps.graph_tools.models import ApprovalStatus, WriteApproval
from apps.graph_tools.selectors import approval_result, approvals_of_conversation
from apps.graph_tools.services import approvals_expire

log = logging.getLogger("kgchat.chat")


class ApprovalWaiting(ServiceError):
    """a proposed graph change in this conversation waits for a decision"""

    status = 409
    code = "approval_pending"


def approvals_settle_claimed(conversation_id: uuid.UUID) -> list[WriteApproval]:
    """Close the waiting calls of this conversation's expired approvals (once each) and return
    them, and refuse a new turn while one is still pending: ``ApprovalWaiting``. Call it inside
    the admission transaction.

    An expired call gets its tool row (the model will read that nothing was written) and an empty
    assistant message with the stop reason ``approval_expired``, which ends the paused turn.
    """
    approvals_expire()
    closed: list[WriteApproval] = []
    for approval in approvals_of_conversation(conversation_id=conversation_id):
        if approval.status == ApprovalStatus.PENDING:
            raise ApprovalWaiting(
                "a proposed graph change waits for a decision: approve or reject it first "
                f"(it expires at {approval.expires_at.isoformat()})"
            )
        ended = Message.objects.filter(
            conversation_id=conversation_id, retrieval_context__approval_id=str(approval.id)
        ).exclude(retrieval_context__stop_reason="approval_required")
        if approval.status != ApprovalStatus.EXPIRED or ended.exists():
            continue
        now = timezone.now()
        result = approval_result(approval)
        Message.objects.create(
            conversation_id=conversation_id,
            role=MessageRole.TOOL,
            content=json.dumps(result, ensure_ascii=False),
            tool_calls=[
                {
                    "id": approval.call_id,
                    "name": approval.tool_name,
                    "output": result,
                    "error": result["error"],
                }
            ],
            created_at=now,
        )
        Message.objects.create(
            conversation_id=conversation_id,
            role=MessageRole.ASSISTANT,
            content="",
            retrieval_context={
                "agent_run_id": str(approval.run_id) if approval.run_id else None,
                "stop_reason": "approval_expired",
                "approval_id": str(approval.id),
            },
            created_at=now + timedelta(microseconds=1),
        )
        closed.append(approval)
    return closed


def approvals_settle(*, conversation_id: uuid.UUID) -> list[ApprovalDecidedFrame]:
    """``_approvals_settle`` in its own transaction (after a decision came too late); the events
    of the approvals it closed as expired, to announce."""
    closed: list[WriteApproval] = []
    with transaction.atomic():
        Conversation.objects.select_for_update().filter(id=conversation_id).first()
        try:
            closed = approvals_settle_claimed(conversation_id)
        except ApprovalWaiting:
            pass
    return [approval_event(approval) for approval in closed]


def approval_event(approval: WriteApproval, *, continued: bool = False) -> ApprovalDecidedFrame:
    """The ``approval_decided`` event of a decided or expired approval (reads who decided)."""
    decided_by = (
        approval.decided_by.get_username() if approval.decided_by_id and approval.decided_by else None
    )
    result = approval_result(approval) if approval.status == ApprovalStatus.EXPIRED else approval.result
    return ApprovalDecidedFrame.model_validate(
        {
            "approvalId": str(approval.id),
            "conversationId": str(approval.conversation_id) if approval.conversation_id else None,
            "callId": approval.call_id,
            "status": approval.status,
            "decidedBy": decided_by,
            "reason": approval.reason,
            "result": result,
            "continued": continued,
        }
    )


async def approvals_announce(events: list[ApprovalDecidedFrame]) -> None:
    """Tell every watcher of each event's conversation (every tab, every process) about it."""
    for event in events:
        if event.conversationId is not None:
            await get_bus().announce(event.conversationId, event)


# A paused turn's approval is closed when it expires, not only when its conversation is next used:
# the process that paused it sets a timer (a plain loop timer, nothing to clean up if the process
# ends first: then the next use or decision closes it, as before).
APPROVAL_EXPIRY_GRACE_SECONDS = 2.0
_expiry_tasks: set[asyncio.Task[None]] = set()


def approval_expiry_arm(conversation_id: uuid.UUID) -> None:
    """Settle and announce the conversation's approvals once the one just proposed has expired."""
    delay = settings.KGCHAT_APPROVAL_TTL_MINUTES * 60 + APPROVAL_EXPIRY_GRACE_SECONDS

    def fire() -> None:
        task = asyncio.ensure_future(_approvals_expired(conversation_id))
        _expiry_tasks.add(task)
        task.add_done_callback(_expiry_tasks.discard)

    # A fresh context: the turn's own (its thread-sensitive executor) has ended by then.
    call_later_bare(delay, fire)


@sync_to_async
def _approvals_settle_now(conversation_id: uuid.UUID) -> list[ApprovalDecidedFrame]:
    try:
        return approvals_settle(conversation_id=conversation_id)
    finally:
        release_connections()


async def _approvals_expired(conversation_id: uuid.UUID) -> None:
    try:
        await approvals_announce(await _approvals_settle_now(conversation_id))
    except Exception:
        log.exception("closing the expired approvals of conversation %s failed", conversation_id)


def decided_approvals_never_continued(*, limit: int) -> list[WriteApproval]:
    """Approvals decided (approved: the write done; or declined) whose continuing turn never
    started: the process died between the decision's commit and the turn's claim. Decided at least
    a lease ago (the deciding process claims at once) and within the turn timeout; their
    conversation free, its last message still the answer paused for this approval, and no run of
    it started since the decision (a continuation that ran and failed is not run again)."""
    now = timezone.now()
    candidates = WriteApproval.objects.filter(
        Exists(Conversation.objects.filter(id=OuterRef("conversation_id"), active_turn_id__isnull=True)),
        ~Exists(
            AgentRun.objects.filter(
                conversation_id=OuterRef("conversation_id"), started_at__gte=OuterRef("decided_at")
            )
        ),
        status__in=[ApprovalStatus.APPROVED, ApprovalStatus.REJECTED],
        decided_at__lt=now - timedelta(seconds=lease_seconds()),
        decided_at__gte=now - timedelta(seconds=settings.KGCHAT_TURN_TIMEOUT_SECONDS),
    ).exclude(call_id="")
    found = []
    candidates = candidates.select_related("decided_by")  # what ``approval_event`` tells
    for approval in candidates[:limit]:
        if approval.conversation_id is None:
            continue
        last = (
            Message.objects.filter(conversation_id=approval.conversation_id)
            .order_by("-created_at", "-id")
            .only("retrieval_context")
            .first()
        )
        context = last.retrieval_context if last is not None else None
        if isinstance(context, dict) and context.get("approval_id") == str(approval.id):
            found.append(approval)
    return found

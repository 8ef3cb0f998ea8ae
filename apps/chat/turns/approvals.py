"""Deciding a graph change an agent proposed in a chat, for every transport (REST, websocket).

The decision itself (who may, what is written, the audit) is ``graph_tools.services.approval_decide``;
here it is followed by the turn that continues the paused conversation (``turn_resume``)
and announced to every socket watching the conversation (``approval_decided``).
"""

from __future__ import annotations

from dataclasses import dataclass

from asgiref.sync import sync_to_async

from apps.agents.plain import Provider
from apps.chat.streams.frames import ApprovalDecidedFrame
from apps.chat.turns.approval_events import approval_event, approvals_announce, approvals_settle
from apps.chat.turns.limits import InvalidMessage
from apps.chat.turns.service import turn_resume
from apps.chat.turns.turn import TurnHandle
from apps.core.db import release_connections
from apps.graph_tools import services as graph_services
from apps.graph_tools.errors import ApprovalNotPending
from apps.graph_tools.models import WriteApproval
from apps.graph_tools.selectors import approval_get
from apps.projects.selectors import Principal

DECISIONS = {"approve": True, "reject": False}


@dataclass(frozen=True)
class Decided:
    """A decided approval and the turn that continues its conversation (None: nothing to continue)."""

    approval: WriteApproval
    turn: TurnHandle | None
    event: ApprovalDecidedFrame


def _decide(*, principal: Principal, approval_id: object, approve: bool, reason: str) -> WriteApproval:
    try:
        approval = graph_services.approval_decide(
            principal=principal, approval_id=approval_id, approve=approve, reason=reason
        )
        approval.decided_by = principal.user
        return approval
    finally:
        release_connections()


def _settle_refused(*, principal: Principal, approval_id: object) -> list[ApprovalDecidedFrame]:
    """Too late (expired) or decided already: the paused turn's waiting call is closed once."""
    try:
        approval = approval_get(principal=principal, approval_id=approval_id)
        if approval.conversation_id is None:
            return []
        return approvals_settle(conversation_id=approval.conversation_id)
    finally:
        release_connections()


async def approval_decide(
    *,
    principal: Principal,
    approval_id: object,
    decision: object,
    reason: object = "",
    provider: Provider | None = None,
) -> Decided:
    """Approve (the write runs, recorded as approved by the principal) or reject a pending approval,
    then continue the conversation that proposed it: the agent gets the write's result, or is told
    the user declined (with the reason), and goes on in a new turn.

    ``InvalidMessage`` for a decision other than ``approve``/``reject`` or a reason that is not text;
    ``ApprovalNotFound`` (404), ``RoleTooLow`` (403: viewers), ``ApprovalNotPending`` (409: decided
    already, or expired) before anything is written.
    """
    if not isinstance(decision, str) or decision not in DECISIONS:
        raise InvalidMessage('decision must be "approve" or "reject"')
    if reason is None:
        reason = ""
    if not isinstance(reason, str):
        raise InvalidMessage("reason must be a string")
    try:
        approval = await sync_to_async(_decide)(
            principal=principal, approval_id=approval_id, approve=DECISIONS[decision], reason=reason
        )
    except ApprovalNotPending:
        await approvals_announce(
            await sync_to_async(_settle_refused)(principal=principal, approval_id=approval_id)
        )
        raise
    handle = None
    try:
        if approval.conversation_id is not None and approval.call_id:
            handle = await turn_resume(approval=approval, provider=provider)
    finally:
        # Announced after the continuing turn is open on the bus, so a watcher can follow it.
        event = approval_event(approval, continued=handle is not None)
        await approvals_announce([event])
    return Decided(approval=approval, turn=handle, event=event)

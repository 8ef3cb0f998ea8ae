"""REST routes of approvals in the chat (PROTOCOL §2): read one, decide one. One service call each."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from ninja import Router, Schema

from apps.chat.turns import approvals
from apps.graph_tools.models import WriteApproval
from apps.graph_tools.selectors import approval_allowed, approval_get
from apps.projects.auth import principal_of
from apps.projects.selectors import Principal

router = Router(tags=["approvals"])


class ApprovalOut(Schema):
    id: uuid.UUID
    projectId: uuid.UUID
    conversationId: uuid.UUID | None
    runId: uuid.UUID | None
    tool: str
    callId: str
    arguments: dict[str, Any]
    diff: dict[str, Any]
    status: str
    reason: str
    result: Any = None
    decidedBy: str | None
    decidedAt: datetime | None
    expiresAt: datetime
    createdAt: datetime
    canDecide: bool


def approval_out(approval: WriteApproval, *, principal: Principal) -> ApprovalOut:
    decided_by = (
        approval.decided_by.get_username() if approval.decided_by_id and approval.decided_by else None
    )
    return ApprovalOut(
        id=approval.id,
        projectId=approval.project_id,
        conversationId=approval.conversation_id,
        runId=approval.run_id,
        tool=approval.tool_name,
        callId=approval.call_id,
        arguments=approval.arguments,
        diff=approval.diff,
        status=approval.status,
        reason=approval.reason,
        result=approval.result,
        decidedBy=decided_by,
        decidedAt=approval.decided_at,
        expiresAt=approval.expires_at,
        createdAt=approval.created_at,
        canDecide=approval.status == "pending"
        and approval_allowed(principal=principal, project_id=approval.project_id),
    )


class DecisionIn(Schema):
    decision: str
    reason: str | None = None


class DecisionOut(Schema):
    approval: ApprovalOut
    conversationId: uuid.UUID | None
    continued: bool


@router.get("/approvals/{approval_id}", response=ApprovalOut)
def get_approval(request: HttpRequest, approval_id: str) -> ApprovalOut:
    principal = principal_of(request)
    return approval_out(approval_get(principal=principal, approval_id=approval_id), principal=principal)


@router.post("/approvals/{approval_id}/decision", response=DecisionOut)
async def decide_approval(request: HttpRequest, approval_id: str, payload: DecisionIn) -> DecisionOut:
    principal = principal_of(request)
    decided = await approvals.approval_decide(
        principal=principal, approval_id=approval_id, decision=payload.decision, reason=payload.reason
    )
    out = await _out(decided.approval, principal)
    return DecisionOut(
        approval=out, conversationId=decided.approval.conversation_id, continued=decided.turn is not None
    )


async def _out(approval: WriteApproval, principal: Principal) -> ApprovalOut:
    def build() -> ApprovalOut:
        fresh = WriteApproval.objects.select_related("decided_by").get(id=approval.id)
        return approval_out(fresh, principal=principal)

    return await sync_to_async(build)()

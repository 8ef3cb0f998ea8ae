"""The write gate of an agent run: a write tool call runs, or becomes a pending approval that stops the run.

Read tools never pass here. A write tool runs at once only when the definition's tool policy says
``"never"`` for it and the user whose turn it is may edit the graph (``tool_approval_needed``);
otherwise the call is stored as a pending ``WriteApproval`` (with its diff, nothing written) and
the run stops after this step, to be continued by a later run once a member has decided.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from apps.agents.events import ApprovalPending
from apps.agents.models import AgentDefinition
from apps.agents.selectors import tool_approval_needed
from apps.core.times import json_time
from apps.graph_tools.models import ChangeAuthority
from apps.graph_tools.registry import WriteAuthorization, tool_call
from apps.graph_tools.selectors import approval_allowed
from apps.graph_tools.services import approval_request
from apps.projects.selectors import Principal

ONE_AT_A_TIME = (
    "another change of this step already waits for the user's decision; "
    "propose this one again after that decision"
)


@dataclass
class WriteGate:
    """Decides, per write tool call of one run, whether it runs or waits for approval."""

    definition: AgentDefinition
    project_id: uuid.UUID
    user_id: int | None
    run_id: uuid.UUID | None
    conversation_id: uuid.UUID | None
    on_pending: Callable[[ApprovalPending], Awaitable[None]]
    pending: ApprovalPending | None = None

    def _principal(self) -> Principal | None:
        if self.user_id is None:
            return None
        user = get_user_model().objects.filter(pk=self.user_id).first()
        return Principal(user=user) if user is not None else None

    def _needs_approval(self, name: str) -> tuple[bool, bool]:
        """(needs approval, the turn's user may decide it)."""
        principal = self._principal()
        if principal is None:
            return True, False
        needed = tool_approval_needed(definition=self.definition, tool_name=name, principal=principal)
        return needed, approval_allowed(principal=principal, project_id=self.project_id)

    async def call(self, name: str, arguments: dict[str, Any], *, call_id: str) -> dict[str, Any]:
        """Run write tool ``name`` or store its pending approval; ``ToolError`` when it cannot run."""
        if self.pending is not None:
            return {"error": ONE_AT_A_TIME, "code": "approval_pending"}
        needed, can_decide = await sync_to_async(self._needs_approval)(name)
        if not needed:
            authorization = WriteAuthorization(
                via=ChangeAuthority.POLICY_NEVER,
                user_id=self.user_id,
                run_id=self.run_id,
                # A resumed run may call it again (its process died after the write, before its
                # result was stored): the run and the call's id make the second call a no-op.
                idempotency_key=f"run:{self.run_id}:{call_id}" if self.run_id is not None else None,
            )
            return await tool_call(
                project_id=self.project_id, name=name, arguments=arguments, authorization=authorization
            )
        return await self._propose(name, arguments, call_id, can_decide)

    async def _propose(
        self, name: str, arguments: dict[str, Any], call_id: str, can_decide: bool
    ) -> dict[str, Any]:
        approval = await sync_to_async(approval_request)(
            project_id=self.project_id,
            tool_name=name,
            arguments=arguments,
            requested_by_id=self.user_id,
            run_id=self.run_id,
            conversation_id=self.conversation_id,
            agent_definition_id=self.definition.pk,
            call_id=call_id,
        )
        self.pending = ApprovalPending(
            approval_id=str(approval.id),
            tool=name,
            call_id=call_id,
            arguments=dict(approval.arguments),
            diff=dict(approval.diff),
            expires_at=json_time(approval.expires_at),
            can_decide=can_decide,
        )
        await self.on_pending(self.pending)
        return {
            "status": "approval_required",
            "approval_id": str(approval.id),
            "summary": approval.diff.get("summary", ""),
            "note": "nothing is written until a member approves; the turn waits for the decision",
        }

"""Writes of a project's graph (import, embedding) and tool calls, one call per transport.

``*_as_member`` services take the principal and check their role; ``*_as_operator`` ones name the
project by id or slug without access checks, for management commands.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.core.inputs import input_check
from apps.graph_tools.embeddings import EMBED_BATCH_SIZE, embed_worker_run, get_embedder, graph_objects_embed
from apps.graph_tools.errors import ApprovalNotPending, ApprovalRequired, ToolError
from apps.graph_tools.importer import ImportResult, graph_import_async, graph_import_with_progress
from apps.graph_tools.models import ApprovalStatus, ChangeAuthority, WriteApproval
from apps.graph_tools.registry import GraphTool, WriteAuthorization, tool_call, tool_get, validate_arguments
from apps.graph_tools.selectors import approval_allowed, approval_get
from apps.graph_tools.writes import write_apply, write_plan
from apps.projects.models import Project, Role
from apps.projects.selectors import Principal, RoleTooLow, project_get, project_get_by_ref

Progress = Callable[[int, int], None] | None


async def graph_import_as_member(
    *, principal: Principal, project_ref: object, lines: Iterable[str | bytes]
) -> ImportResult:
    """Import JSON Lines into a project where the principal is an editor; return at the commit, with
    the project's embedding progress (the background worker embeds what waits)."""
    project = await sync_to_async(project_get)(
        principal=principal, project_ref=project_ref, min_role=Role.EDITOR
    )
    return await graph_import_async(project=project, lines=lines, user_id=principal.user_id)


@dataclass(frozen=True)
class OperatorImport:
    project: Project
    result: ImportResult


def graph_import_as_operator(*, project_ref: str, lines: Iterable[str | bytes]) -> OperatorImport:
    """Import JSON Lines into a project; return at the commit, with the embedding progress."""
    project = project_get_by_ref(project_ref=project_ref)
    return OperatorImport(project=project, result=graph_import_with_progress(project=project, lines=lines))


@dataclass(frozen=True)
class OperatorEmbedding:
    project: Project
    count: int
    model: str


def graph_embed_as_operator(
    *, project_ref: str, only_missing: bool, batch_size: int, progress: Progress = None
) -> OperatorEmbedding:
    """Embed a project's entities (all, or those without a vector of the current model)."""
    project = project_get_by_ref(project_ref=project_ref)
    embedder = get_embedder()
    count = graph_objects_embed(
        project_id=project.id,
        only_missing=only_missing,
        batch_size=max(1, batch_size),
        progress=progress,
        embedder=embedder,
    )
    return OperatorEmbedding(project=project, count=count, model=embedder.name)


async def tool_call_as_member(
    *, principal: Principal, project_ref: object, name: str, arguments: dict[str, Any] | None
) -> dict[str, Any]:
    """Run graph tool ``name`` on a project the principal may see (write tools: see ``tool_call_direct``)."""
    project = await sync_to_async(project_get)(principal=principal, project_ref=project_ref)
    return await tool_call_direct(principal=principal, project_id=project.id, name=name, arguments=arguments)


async def tool_call_direct(
    *, principal: Principal | None, project_id: uuid.UUID, name: str, arguments: dict[str, Any] | None
) -> dict[str, Any]:
    """Run tool ``name`` for a caller without an agent run (REST tool route, MCP).

    Read tools run for every member. A write tool needs an editor or owner (``RoleTooLow``) and,
    as there is no approval step outside a chat turn, the operator's ``KGCHAT_DIRECT_WRITES``:
    without it the call answers ``ApprovalRequired`` and writes nothing. ``principal`` None is an
    operator (the stdio MCP server).
    """
    tool = tool_get(name)
    if tool.read_only:
        return await tool_call(project_id=project_id, name=name, arguments=arguments)
    if principal is not None and not await sync_to_async(approval_allowed)(
        principal=principal, project_id=project_id
    ):
        raise RoleTooLow(Role.EDITOR)
    if not settings.KGCHAT_DIRECT_WRITES:
        raise ApprovalRequired(
            f"{name} changes the graph and needs approval, which only a chat turn can ask for; "
            "nothing was written (operators may allow direct writes with KGCHAT_DIRECT_WRITES)"
        )
    authorization = WriteAuthorization(
        via=ChangeAuthority.DIRECT, user_id=principal.user_id if principal is not None else None
    )
    return await tool_call(project_id=project_id, name=name, arguments=arguments, authorization=authorization)


def _write_tool(name: str) -> GraphTool:
    tool = tool_get(name)
    if tool.read_only:
        raise ToolError(f"{name} is not a write tool: it runs without approval", code="not_a_write_tool")
    return tool


def tool_write_preview(
    *, project_id: uuid.UUID, name: str, arguments: dict[str, Any] | None
) -> dict[str, Any]:
    """The human-readable diff of write tool call ``name(arguments)``, writing nothing: ``summary``,
    ``changes`` ``[{field, before, after}]``, ``before``, ``after``. ``ToolError`` when the call could
    not run (invalid arguments, a missing entity, a duplicate)."""
    tool = _write_tool(name)
    return write_plan(project_id=project_id, tool_name=name, args=validate_arguments(tool, arguments)).diff()


def approval_request(
    *,
    project_id: uuid.UUID,
    tool_name: str,
    arguments: dict[str, Any] | None,
    requested_by_id: int | None,
    run_id: uuid.UUID | None = None,
    conversation_id: uuid.UUID | None = None,
    agent_definition_id: uuid.UUID | None = None,
    call_id: str = "",
    now: datetime | None = None,
) -> WriteApproval:
    """Store a pending approval of a write tool call with its diff, expiring after
    ``KGCHAT_APPROVAL_TTL_MINUTES``. A call that could not run raises ``ToolError`` and stores nothing."""
    diff = tool_write_preview(project_id=project_id, name=tool_name, arguments=arguments)
    now = now or timezone.now()
    return WriteApproval.objects.create(
        project_id=project_id,
        tool_name=tool_name,
        arguments=arguments or {},
        diff=diff,
        requested_by_id=requested_by_id,
        run_id=run_id,
        conversation_id=conversation_id,
        agent_definition_id=agent_definition_id,
        call_id=call_id,
        expires_at=now + timedelta(minutes=settings.KGCHAT_APPROVAL_TTL_MINUTES),
    )


MAX_REASON = 2000


def approval_decide(
    *, principal: Principal, approval_id: object, approve: bool, reason: str = "", now: datetime | None = None
) -> WriteApproval:
    """Decide a pending approval as an editor or owner of its project.

    Approved, the write runs at once, recorded as approved by the principal (``result`` holds the
    tool result, or ``{"error", "code"}`` when the graph moved on and the call can no longer run:
    the decision stands, nothing is written). Rejected, nothing is written and ``result`` says so.
    Not pending: ``ApprovalNotPending``; past ``expires_at``: marked expired, then the same error.
    """
    now = now or timezone.now()
    input_check(reason, field="reason")
    if len(reason) > MAX_REASON:
        raise ToolError(f"reason is longer than {MAX_REASON} characters", code="invalid_reason")
    visible = approval_get(principal=principal, approval_id=approval_id)
    if not approval_allowed(principal=principal, project_id=visible.project_id):
        raise RoleTooLow(Role.EDITOR)
    expired = decided = False
    with transaction.atomic():
        approval = WriteApproval.objects.select_for_update().get(id=visible.id)
        if approval.status == ApprovalStatus.PENDING and approval.expires_at <= now:
            approval.status = ApprovalStatus.EXPIRED
            approval.save(update_fields=["status"])
            expired = True
        elif approval.status == ApprovalStatus.PENDING:
            approval.decided_by_id, approval.decided_at, approval.reason = principal.user_id, now, reason
            if approve:
                approval.status = ApprovalStatus.APPROVED
                authorization = WriteAuthorization(
                    via=ChangeAuthority.APPROVAL,
                    user_id=principal.user_id,
                    approval_id=approval.id,
                    run_id=approval.run_id,
                    idempotency_key=f"approval:{approval.id}",
                )
                try:
                    tool = _write_tool(approval.tool_name)
                    outcome = write_apply(
                        project_id=approval.project_id,
                        tool_name=approval.tool_name,
                        args=validate_arguments(tool, approval.arguments),
                        authorization=authorization,
                    )
                    approval.result = outcome.result
                except ToolError as exc:
                    approval.result = {"error": exc.message, "code": exc.code}
            else:
                approval.status = ApprovalStatus.REJECTED
                declined = "the user declined this change; nothing was written"
                approval.result = {
                    "error": f"{declined} (reason: {reason})" if reason else declined,
                    "code": "approval_rejected",
                }
            approval.save()
            decided = True
    if expired:
        raise ApprovalNotPending("this approval has expired; nothing was written")
    if not decided:
        raise ApprovalNotPending(f"this approval is already {approval.status}; it can be decided only once")
    return approval


def approvals_expire(*, now: datetime | None = None) -> int:
    """Mark every pending approval past its ``expires_at`` expired; return how many."""
    now = now or timezone.now()
    return WriteApproval.objects.filter(status=ApprovalStatus.PENDING, expires_at__lte=now).update(
        status=ApprovalStatus.EXPIRED
    )


def embed_worker_serve(
    *,
    stop: threading.Event,
    batch_size: int | None = None,
    idle_seconds: float = 2.0,
    project_id: uuid.UUID | None = None,
) -> int:
    """Run the background embedding worker until ``stop`` is set; return how many entities it embedded.

    ``project_id``: only that project's vectors (``embed_worker_run``)."""
    done = 0

    def count(n: int) -> None:
        nonlocal done
        done += n

    embed_worker_run(
        batch_size=batch_size or EMBED_BATCH_SIZE,
        idle_seconds=idle_seconds,
        stop=stop,
        on_batch=count,
        project_id=project_id,
    )
    return done

"""Several writes in one transaction with one graph version: an extraction's approved items, a
curation change set (its check and its decision). Each step is a write tool of ``writes.WRITES``,
an internal one (``WriteKind.internal``) included: ``write_step_args`` validates its arguments.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from apps.graph_tools.errors import ToolError
from apps.graph_tools.importer import project_write_turn
from apps.graph_tools.registry import (
    GraphTool,
    ToolArgs,
    ToolContext,
    WriteAuthorization,
    tool_get,
    validate_arguments,
)
from apps.graph_tools.versions import graph_version_current
from apps.graph_tools.writes import WRITES, graph_changes_record, write_plan, write_result


@dataclass
class SetStep:
    """One write of a set (``write_apply_set``): the tool, its arguments built when the step runs
    (so a relationship can name an entity an earlier step created; None: skip the step), and what
    its audit rows name beyond the authorization: the document and passage it came from."""

    tool_name: str
    build: Callable[[], ToolArgs | None]
    document_id: uuid.UUID | None = None
    passage_id: uuid.UUID | None = None
    result: dict[str, Any] | None = None
    error: dict[str, str] | None = None


def write_apply_set(
    *, project_id: uuid.UUID, steps: list[SetStep], authorization: WriteAuthorization
) -> int | None:
    """Apply several writes in one transaction with one graph version bump (None: nothing changed).

    Each step runs in a savepoint: a step that cannot run (``ToolError``: a key taken meanwhile, a
    relationship that exists) records its ``error`` and changes nothing, and the others go on. One
    ``GraphChange`` per entity or relationship changed, naming the step's document and passage.
    """
    rows: list[dict[str, Any]] = []
    with transaction.atomic():
        project_write_turn(project_id)
        version = graph_version_current(project_id=project_id) + 1
        for step in steps:
            try:
                args = step.build()
                if args is None:
                    continue
                kind = WRITES[step.tool_name]
                with transaction.atomic():
                    plan = write_plan(project_id=project_id, tool_name=step.tool_name, args=args)
                    if not plan.changes_anything:
                        step.result = write_result(plan, version - 1, changed=False)
                        continue
                    changed = kind.apply(project_id, args, plan)
            except ToolError as exc:
                step.error = {"error": exc.message, "code": exc.code, **getattr(exc, "extra", {})}
                continue
            step.result = write_result(plan, version, changed=True)
            rows += [
                {**row, "document_id": step.document_id, "passage_id": step.passage_id} for row in changed
            ]
        if not rows:
            return None
        version = graph_changes_record(project_id, authorization, rows)
    return version


async def _internal_only(ctx: ToolContext, args: ToolArgs) -> dict[str, Any]:
    raise ToolError("this write is made only by an undo's change set", code="unknown_tool")


def write_step_args(tool_name: str, values: dict[str, Any] | None) -> ToolArgs:
    """``values`` validated as the arguments of write tool ``tool_name`` (``ToolError`` naming the
    fault): a tool of the registry, or an internal write (``WriteKind.internal``), which the
    registry does not offer and only an undo's change set proposes."""
    kind = WRITES.get(tool_name)
    if kind is None or not kind.internal:
        return validate_arguments(tool_get(tool_name), values)
    tool = GraphTool(kind.name, kind.description, kind.args_model, _internal_only, read_only=False)
    return validate_arguments(tool, values)

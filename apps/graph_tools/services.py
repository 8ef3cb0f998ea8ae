"""Writes of a project's graph (import, embedding) and tool calls, one call per transport.

``*_as_member`` services take the principal and check their role; ``*_as_operator`` ones name the
project by id or slug without access checks, for management commands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from apps.graph_tools.embeddings import get_embedder, graph_objects_embed
from apps.graph_tools.importer import ImportResult, graph_import, graph_import_async, graph_import_embed
from apps.graph_tools.registry import tool_call
from apps.projects.models import Project, Role
from apps.projects.selectors import Principal, project_get, project_get_by_ref

Progress = Callable[[int, int], None] | None


async def graph_import_as_member(
    *, principal: Principal, project_ref: object, lines: Iterable[str | bytes]
) -> ImportResult:
    """Import JSON Lines into a project where the principal is an editor, then embed what it upserted."""
    project = await sync_to_async(project_get)(
        principal=principal, project_ref=project_ref, min_role=Role.EDITOR
    )
    return await graph_import_async(project=project, lines=lines)


@dataclass(frozen=True)
class OperatorImport:
    project: Project
    result: ImportResult


def graph_import_as_operator(
    *, project_ref: str, lines: Iterable[str | bytes], progress: Progress = None
) -> OperatorImport:
    """Import JSON Lines into a project, then embed what it upserted (an embedding failure is logged)."""
    project = project_get_by_ref(project_ref=project_ref)
    result = graph_import(project=project, lines=lines)
    result.entities_embedded = graph_import_embed(project_id=project.id, result=result, progress=progress)
    return OperatorImport(project=project, result=result)


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
    """Run graph tool ``name`` on a project the principal may see (every tool is read-only)."""
    project = await sync_to_async(project_get)(principal=principal, project_ref=project_ref)
    return await tool_call(project_id=project.id, name=name, arguments=arguments)

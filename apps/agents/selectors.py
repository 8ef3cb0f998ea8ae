"""Reads for the executor and the batch command: definitions by name, runs and their trace."""

from __future__ import annotations

import uuid

from apps.agents.models import AgentDefinition, AgentRun, AgentRunMessage, AgentRunToolCall
from apps.projects.errors import NotFound
from apps.projects.models import Project


class AgentDefinitionNotFound(NotFound):
    """agent definition not found"""

    code = "agent_definition_not_found"


async def agent_definitions_by_names(*, project_id: uuid.UUID, names: list[str]) -> list[AgentDefinition]:
    """The project's enabled definitions named in ``names``, in that order; others are left out."""
    if not names:
        return []
    enabled = AgentDefinition.objects.filter(project_id=project_id, name__in=names, disabled_reason="")
    found = {d.name: d async for d in enabled}
    return [found[n] for n in names if n in found]


def agent_definition_by_name(*, project: Project, name: str) -> AgentDefinition:
    try:
        return AgentDefinition.objects.get(project=project, name=name)
    except AgentDefinition.DoesNotExist:
        raise AgentDefinitionNotFound(f"no agent {name!r} in project {project.slug}") from None


async def agent_run_get(*, run_id: uuid.UUID) -> AgentRun:
    try:
        return await AgentRun.objects.aget(pk=run_id)
    except AgentRun.DoesNotExist:
        raise NotFound(f"no agent run {run_id}") from None


async def agent_run_tool_calls(*, run_id: uuid.UUID) -> list[AgentRunToolCall]:
    return [
        c async for c in AgentRunToolCall.objects.filter(run_id=run_id).order_by("created_at", "step_number")
    ]


async def agent_run_messages(*, run_id: uuid.UUID) -> list[AgentRunMessage]:
    return [m async for m in AgentRunMessage.objects.filter(run_id=run_id).order_by("created_at")]

"""REST routes for agent definitions and the default-agent installation (PROTOCOL §2)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema, Status

from apps.agents import definitions, selectors
from apps.agents.mcp_servers import mcp_servers_public
from apps.agents.models import AgentDefinition
from apps.core.inputs import ListLimit, ListOffset
from apps.core.paging import page_of
from apps.projects.auth import principal_of

router = Router(tags=["agents"])

# A page of agent definitions (PROTOCOL §2: lists take ``limit``/``offset``; ``count`` is the total).
PAGE_SIZE = 200


class ModelOut(Schema):
    name: str
    temperature: float | None = None


class AgentDefinitionOut(Schema):
    id: uuid.UUID
    projectId: uuid.UUID
    name: str
    description: str
    systemPrompt: str
    model: ModelOut
    tools: list[str]
    flowType: str
    isDefault: bool
    maxSteps: int
    visibility: str
    # Names, URLs, transports and tool filters only: never headers (operators' credentials).
    mcpServers: list[dict[str, Any]]
    # Per write tool among ``tools``: {"approval": "always" | "never"} (unset tools show "always").
    toolPolicy: dict[str, dict[str, str]]
    # Why the definition may not run (set by an operator); null when it is enabled.
    disabledReason: str | None
    createdAt: datetime
    updatedAt: datetime


class AgentDefinitionList(Schema):
    items: list[AgentDefinitionOut]
    count: int


class AgentDefinitionIn(Schema):
    name: str | None = None
    description: str | None = None
    systemPrompt: str | None = None
    model: dict[str, Any] | None = None
    tools: list[str] | None = None
    flowType: str | None = None
    isDefault: bool | None = None
    maxSteps: int | None = None
    visibility: str | None = None
    subAgents: list[str] | None = None
    mcpServers: list[dict[str, Any]] | None = None
    toolPolicy: dict[str, Any] | None = None
    historyLimit: int | None = None
    tokenBudget: int | None = None


class InstallOut(Schema):
    installed: list[str]
    existing: list[str]


FIELD_NAMES = {
    "name": "name",
    "description": "description",
    "systemPrompt": "system_prompt",
    "model": "model",
    "tools": "tools",
    "flowType": "flow_type",
    "isDefault": "is_default",
    "maxSteps": "max_steps",
    "visibility": "visibility",
    "subAgents": "sub_agents",
    "mcpServers": "mcp_servers",
    "toolPolicy": "tool_policy",
    "historyLimit": "history_limit",
    "tokenBudget": "token_budget",
}


def _fields(payload: AgentDefinitionIn) -> dict[str, Any]:
    given = payload.dict(exclude_unset=True)
    return {FIELD_NAMES[k]: v for k, v in given.items() if k in FIELD_NAMES}


def definition_out(d: AgentDefinition) -> AgentDefinitionOut:
    model = d.model_choice
    return AgentDefinitionOut(
        id=d.id,
        projectId=d.project_id,
        name=d.name,
        description=d.description,
        systemPrompt=d.system_prompt,
        model=ModelOut(name=model.name, temperature=model.temperature),
        tools=list(d.tools or []),
        flowType=d.flow_type,
        isDefault=d.is_default,
        maxSteps=d.max_steps,
        visibility=d.visibility,
        mcpServers=mcp_servers_public(d.mcp_servers),
        toolPolicy=selectors.tool_policy_effective(d),
        disabledReason=d.disabled_reason or None,
        createdAt=d.created_at,
        updatedAt=d.updated_at,
    )


@router.get("/projects/{project_id}/agent-definitions", response=AgentDefinitionList)
def list_definitions(
    request: HttpRequest, project_id: str, limit: ListLimit = PAGE_SIZE, offset: ListOffset = 0
) -> AgentDefinitionList:
    found = selectors.agent_definition_list(principal=principal_of(request), project_ref=project_id)
    page = page_of(found, limit=limit, offset=offset, size=PAGE_SIZE)
    return AgentDefinitionList(items=[definition_out(d) for d in page.items], count=page.count)


@router.post("/projects/{project_id}/agent-definitions", response={201: AgentDefinitionOut})
def create_definition(
    request: HttpRequest, project_id: str, payload: AgentDefinitionIn
) -> Status[AgentDefinitionOut]:
    definition = definitions.agent_definition_create(
        principal=principal_of(request), project_ref=project_id, fields=_fields(payload)
    )
    return Status(201, definition_out(definition))


@router.get("/agent-definitions/{definition_id}", response=AgentDefinitionOut)
def get_definition(request: HttpRequest, definition_id: str) -> AgentDefinitionOut:
    return definition_out(
        selectors.agent_definition_get(principal=principal_of(request), definition_id=definition_id)
    )


@router.patch("/agent-definitions/{definition_id}", response=AgentDefinitionOut)
def update_definition(
    request: HttpRequest, definition_id: str, payload: AgentDefinitionIn
) -> AgentDefinitionOut:
    definition = definitions.agent_definition_update(
        principal=principal_of(request), definition_id=definition_id, fields=_fields(payload)
    )
    return definition_out(definition)


@router.delete("/agent-definitions/{definition_id}", response={204: None})
def delete_definition(request: HttpRequest, definition_id: str) -> Status[None]:
    definitions.agent_definition_delete(principal=principal_of(request), definition_id=definition_id)
    return Status(204, None)


@router.post("/admin/projects/{project_id}/install-default-agents", response=InstallOut)
def install_default_agents(request: HttpRequest, project_id: str) -> InstallOut:
    result = definitions.default_agents_install_as_owner(
        principal=principal_of(request), project_ref=project_id
    )
    return InstallOut(installed=result.installed, existing=result.existing)

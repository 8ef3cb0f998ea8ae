"""What an OpenAI-compatible client may talk to (``GET /v1/models``), and which one it named.

Each agent definition the caller may use, in each project the caller (or the token's one
project) may see, is a model ``<project-slug>/<agent-name>``; each project's plain chat is
``<project-slug>/plain`` (an agent named ``plain`` takes that id: the plain chat is then
reached through kgchat's own page only). Disabled definitions are not offered.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from apps.agents.selectors import agent_definitions_visible
from apps.core.db import release_connections
from apps.core.errors import NotFound
from apps.projects.selectors import Principal, project_list

PLAIN = "plain"


class ModelNotFound(NotFound):
    """model not found"""

    code = "model_not_found"


@dataclass(frozen=True)
class ChatModel:
    """One model of ``/v1``: a project's agent, or its plain chat (``agent_definition_id`` None)."""

    id: str
    name: str
    project_id: uuid.UUID
    project_slug: str
    agent_definition_id: uuid.UUID | None
    created: datetime


def chat_models_list(*, principal: Principal) -> list[ChatModel]:
    """Every model the principal may talk to, project by project (by slug), agents by name, then
    the plain chat."""
    try:
        projects = list(project_list(principal=principal).order_by("slug"))
        definitions = (
            agent_definitions_visible(principal=principal)
            .filter(disabled_reason="", project__in=[p.id for p in projects])
            .order_by("name")
        )
        by_project: dict[uuid.UUID, list[ChatModel]] = {p.id: [] for p in projects}
        slugs = {p.id: p.slug for p in projects}
        names = {p.id: p.name for p in projects}
        for d in definitions:
            by_project[d.project_id].append(
                ChatModel(
                    id=f"{slugs[d.project_id]}/{d.name}",
                    name=f"{names[d.project_id]}: {d.name}",
                    project_id=d.project_id,
                    project_slug=slugs[d.project_id],
                    agent_definition_id=d.id,
                    created=d.created_at,
                )
            )
        models: list[ChatModel] = []
        for project in projects:
            agents = by_project[project.id]
            models += agents
            if not any(m.id == f"{project.slug}/{PLAIN}" for m in agents):
                models.append(
                    ChatModel(
                        id=f"{project.slug}/{PLAIN}",
                        name=f"{project.name}: plain chat",
                        project_id=project.id,
                        project_slug=project.slug,
                        agent_definition_id=None,
                        created=project.created_at,
                    )
                )
        return models
    finally:
        release_connections()


def chat_model_get(*, principal: Principal, model_id: str) -> ChatModel:
    """The model ``model_id`` names, if the principal may talk to it; else ``ModelNotFound``."""
    for model in chat_models_list(principal=principal):
        if model.id == model_id:
            return model
    raise ModelNotFound(f"the model {model_id!r} does not exist or this key may not use it")

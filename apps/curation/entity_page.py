"""What an entity's page shows, read in one call (#51): the entity (or the one it was merged into),
its aliases and properties, its relationships by type and direction, the passages that mention it,
the viewer's answers that cited it and a page of its history."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator

from apps.curation import graph_selectors as selectors
from apps.documents.models import Document
from apps.graph_tools.models import GraphObject
from apps.graph_tools.names import ALIASES_PROPERTY
from apps.graph_tools.selectors import entity_history
from apps.graph_tools.writes import change_action_words
from apps.projects.models import Project
from apps.projects.selectors import Principal

HISTORY_PER_PAGE = 25


@dataclass(frozen=True)
class EntityPage:
    project: Project
    entity: GraphObject
    aliases: list[Any]
    properties: list[tuple[str, Any]]
    groups: Any
    passages: Any
    answers: Any
    history_page: Page[Any]
    history: list[dict[str, Any]]


def entity_page_read(
    *, principal: Principal, project_ref: object, entity_id: uuid.UUID, history_page: str | None
) -> EntityPage:
    """The page of ``entity_id`` in a project the principal is a member of; ``history_page`` is the
    history's page number as the query string gives it. ``NotFound`` / ``EntityNotFound``. The
    entity is the one it was merged into when it was merged away (the caller redirects)."""
    project, entity = selectors.entity_of_project(
        principal=principal, project_ref=project_ref, ref=str(entity_id)
    )
    properties = dict(entity.properties or {})
    aliases = properties.pop(ALIASES_PROPERTY, None)
    changes = entity_history(principal=principal, project_ref=project.id, ref=str(entity.id))
    page = Paginator(changes, HISTORY_PER_PAGE).get_page(history_page)
    names = dict(
        Document.objects.filter(id__in={c.document_id for c in page if c.document_id}).values_list(
            "id", "name"
        )
    )
    words = change_action_words()
    history = [
        {
            "change": c,
            "action": words.get(c.action, c.action),
            "who": c.user.get_username() if c.user else "",
            "document_name": names.get(c.document_id) if c.document_id else None,
        }
        for c in page
    ]
    return EntityPage(
        project=project,
        entity=entity,
        aliases=aliases if isinstance(aliases, list) else [],
        properties=sorted(properties.items()),
        groups=selectors.relationship_groups(entity_id=entity.id),
        passages=selectors.passages_mentioning(project_id=project.id, entity_id=entity.id),
        answers=selectors.answers_citing(principal=principal, project_id=project.id, entity_id=entity.id),
        history_page=page,
        history=history,
    )

"""Reads of the graph for REST browsing, and the one id-or-key resolver of entities.

The tools have their own, faster queries (``graph_queries``, ``search``) but name entities through
``entity_get`` too. Reads a member makes take the principal and check it here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from apps.graph_tools.errors import EntityNotFound
from apps.graph_tools.models import GraphObject, GraphRelationship
from apps.graph_tools.registry import GraphTool, tool_list
from apps.projects.selectors import Principal, parse_uuid, project_get


def _entities(project_id: uuid.UUID) -> QuerySet[GraphObject]:
    return GraphObject.objects.filter(project_id=project_id).defer("embedding", "search_vector")


def entity_get(*, project_id: uuid.UUID, ref: str) -> GraphObject:
    """Return the project's entity whose id or import key is ``ref``; an id wins over a key."""
    entity_id = parse_uuid(ref)
    entity = _entities(project_id).filter(id=entity_id).first() if entity_id else None
    if entity is None:
        entity = _entities(project_id).filter(key=ref).first()
    if entity is None:
        raise EntityNotFound(f"entity {ref!r} not found (give an entity id or key from a search result)")
    return entity


def entity_list(
    *, principal: Principal, project_ref: object, type: str | None = None, q: str | None = None
) -> QuerySet[GraphObject]:
    """The entities of a project the principal may see, by type and/or a substring of name, key or
    description."""
    project = project_get(principal=principal, project_ref=project_ref)
    qs = _entities(project.id)
    if type:
        qs = qs.filter(type=type)
    if q:
        qs = qs.filter(Q(name__icontains=q) | Q(key__icontains=q) | Q(description__icontains=q))
    return qs.order_by("type", "name", "key")


@dataclass(frozen=True)
class EntityEdge:
    id: uuid.UUID
    type: str
    direction: str  # "out": the entity is the source; "in": the target
    other: GraphObject
    properties: dict[str, Any]


@dataclass(frozen=True)
class EntityDetail:
    entity: GraphObject
    edges: list[EntityEdge]


def entity_detail(*, principal: Principal, project_ref: object, ref: str, limit: int = 200) -> EntityDetail:
    """One entity of a project the principal may see, with its relationships in both directions."""
    project = project_get(principal=principal, project_ref=project_ref)
    entity = entity_get(project_id=project.id, ref=ref)
    out = (
        GraphRelationship.objects.filter(src=entity)
        .select_related("dst")
        .defer("dst__embedding", "dst__search_vector")
        .order_by("type", "dst__name")[:limit]
    )
    inc = (
        GraphRelationship.objects.filter(dst=entity)
        .select_related("src")
        .defer("src__embedding", "src__search_vector")
        .order_by("type", "src__name")[:limit]
    )
    edges = [EntityEdge(r.id, r.type, "out", r.dst, r.properties) for r in out]
    edges += [EntityEdge(r.id, r.type, "in", r.src, r.properties) for r in inc]
    return EntityDetail(entity=entity, edges=edges)


def tool_list_for(*, principal: Principal, project_ref: object) -> list[GraphTool]:
    """The graph tools a member of the project may call (all of them, to every member)."""
    project_get(principal=principal, project_ref=project_ref)
    return tool_list()

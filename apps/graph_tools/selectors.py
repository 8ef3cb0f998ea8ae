"""Reads of the graph for REST browsing, and the one id-or-key resolver of entities.

The tools have their own, faster queries (``graph_queries``, ``search``) but name entities through
``entity_resolve`` too. Reads a member makes take the principal and check it here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet

from apps.graph_tools.errors import EntityNotFound
from apps.graph_tools.models import GraphObject, GraphRelationship
from apps.graph_tools.registry import GraphTool, tool_list
from apps.graph_tools.search import ENTITY_COLUMNS, entity_row, json_value
from apps.projects.selectors import Principal, parse_uuid, project_get


def _entities(project_id: uuid.UUID) -> QuerySet[GraphObject]:
    return GraphObject.objects.filter(project_id=project_id).defer("embedding", "search_vector")


def entity_resolve(*, project_id: uuid.UUID, ref: str) -> dict[str, Any]:
    """Return the project's entity whose id or import key is ``ref`` (an id wins over a key), as tools
    show it: ``id``, ``key``, ``type``, ``name``, ``description``, ``properties``.

    One round trip and no ORM: every graph tool that names an entity starts here.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT {ENTITY_COLUMNS}, o.properties FROM kb.graph_objects o
                WHERE o.project_id = %(project)s AND (o.key = %(ref)s OR o.id = %(id)s)
                ORDER BY (o.id = %(id)s) DESC NULLS LAST LIMIT 1""",
            {"project": project_id, "ref": ref, "id": parse_uuid(ref)},
        )
        row = cursor.fetchone()
    if row is None:
        raise EntityNotFound(f"entity {ref!r} not found (give an entity id or key from a search result)")
    return {**entity_row(row), "properties": json_value(row[5])}


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
    entity = _entities(project.id).get(id=entity_resolve(project_id=project.id, ref=ref)["id"])
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

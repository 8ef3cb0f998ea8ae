"""Reads of the graph for browsing (REST). The tools have their own, faster queries."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q, QuerySet

from apps.graph_tools.models import GraphObject, GraphRelationship
from apps.projects.errors import NotFound
from apps.projects.models import Project


class GraphObjectNotFound(NotFound):
    """entity not found"""

    code = "entity_not_found"


def entity_list(*, project: Project, type: str | None = None, q: str | None = None) -> QuerySet[GraphObject]:
    qs = GraphObject.objects.filter(project=project).defer("embedding", "search_vector")
    if type:
        qs = qs.filter(type=type)
    if q:
        qs = qs.filter(Q(name__icontains=q) | Q(key__icontains=q) | Q(description__icontains=q))
    return qs.order_by("type", "name", "key")


def entity_get(*, project: Project, id_or_key: str) -> GraphObject:
    """Return one entity of ``project`` by its id or its import key."""
    qs = GraphObject.objects.filter(project=project).defer("embedding", "search_vector")
    try:
        obj = qs.filter(id=uuid.UUID(id_or_key)).first()
    except ValueError:
        obj = None
    if obj is None:
        obj = qs.filter(key=id_or_key).first()
    if obj is None:
        raise GraphObjectNotFound(f"entity {id_or_key!r} not found")
    return obj


def entity_edges(*, entity: GraphObject, limit: int = 200) -> list[dict[str, Any]]:
    """Return the entity's relationships in both directions, with the entity at the other end."""
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
    edges: list[dict[str, Any]] = [
        {"id": r.id, "type": r.type, "direction": "out", "other": r.dst, "properties": r.properties}
        for r in out
    ]
    edges += [
        {"id": r.id, "type": r.type, "direction": "in", "other": r.src, "properties": r.properties}
        for r in inc
    ]
    return edges

"""Reads of a project's graph for the generic question generator."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from apps.graph_tools.models import GraphObject, GraphRelationship

MAX_FACTS = 50_000


@dataclass(frozen=True)
class Fact:
    src_key: str
    src_type: str
    src_name: str
    rel: str
    dst_name: str
    dst_key: str = ""
    dst_type: str = ""


def graph_facts(*, project_id: uuid.UUID, limit: int = MAX_FACTS) -> list[Fact]:
    """Entity -> relationship -> entity facts of a project, in a stable order (at most ``limit``)."""
    rows = (
        GraphRelationship.objects.filter(project_id=project_id)
        .order_by("src__key", "type", "dst__key")
        .values_list("src__key", "src__type", "src__name", "type", "dst__name", "dst__key", "dst__type")[
            :limit
        ]
    )
    return [Fact(*row) for row in rows]


def graph_names(*, project_id: uuid.UUID) -> set[str]:
    """Every entity name of a project (to invent names that are not there)."""
    return set(GraphObject.objects.filter(project_id=project_id).values_list("name", flat=True))


def graph_name_counts(*, project_id: uuid.UUID, names: set[str]) -> dict[tuple[str, str], int]:
    """How many entities of each (type, name) among ``names`` the project has."""
    counts: dict[tuple[str, str], int] = {}
    rows = GraphObject.objects.filter(project_id=project_id, name__in=list(names)).values_list("type", "name")
    for type_, name in rows:
        counts[(type_, name)] = counts.get((type_, name), 0) + 1
    return counts


def graph_numbers(
    *, project_id: uuid.UUID, limit: int = MAX_FACTS
) -> list[tuple[str, str, str, dict[str, float]]]:
    """(key, type, name, numeric properties) of the project's entities that have any, in a stable order."""
    rows = (
        GraphObject.objects.filter(project_id=project_id)
        .exclude(properties={})
        .order_by("key")
        .values_list("key", "type", "name", "properties")[:limit]
    )
    out = []
    for key, type_, name, properties in rows:
        numbers = {
            k: v
            for k, v in (properties or {}).items()
            if isinstance(v, int | float) and not isinstance(v, bool) and not k.casefold().endswith("id")
        }
        if numbers:
            out.append((key, type_, name, numbers))
    return out

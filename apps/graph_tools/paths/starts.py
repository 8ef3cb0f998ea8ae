"""Resolving a path query's start entities: by name, key or id, a search, or the names a text mentions."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection

from apps.graph_tools.errors import EntityNotFound
from apps.graph_tools.names import ALIAS_MATCH, mention_candidates
from apps.graph_tools.paths.args import MAX_START_ENTITIES, StartRef
from apps.graph_tools.search import json_value, text_search
from apps.graph_tools.selectors import entity_resolve_following

# --- resolving the starts --------------------------------------------------------------------

ENTITY_COLUMNS = "o.id, o.key, o.type, o.name, o.properties"


def entity_row(row: Sequence[Any]) -> dict[str, Any]:
    return {
        "id": str(row[0]),
        "key": row[1],
        "type": row[2],
        "name": row[3],
        "properties": json_value(row[4]) or {},
    }


def compact(entity: dict[str, Any]) -> dict[str, Any]:
    return {k: entity[k] for k in ("id", "key", "type", "name")}


def fetch(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _mentioned(project_id: uuid.UUID, text: str, type_: str | None) -> list[dict[str, Any]]:
    """The entities whose whole names (or aliases) ``text`` contains: the longest first, overlaps
    left out."""
    candidates = mention_candidates(text)
    if not candidates:
        return []
    params: dict[str, Any] = {"project": project_id, "names": list(candidates), "type": type_}
    type_filter = " AND o.type = %(type)s" if type_ else ""
    # Two selects, so each is served by its own index (names; the aliases' partial GIN index).
    rows = fetch(
        f"""(SELECT {ENTITY_COLUMNS}, ARRAY[]::text[] FROM kb.graph_objects o
             WHERE o.project_id = %(project)s AND lower(o.name) = ANY(%(names)s){type_filter}
             ORDER BY o.name, o.key LIMIT {MAX_START_ENTITIES * 5})
            UNION ALL
            (SELECT {ENTITY_COLUMNS}, kb.entity_aliases(o.properties) FROM kb.graph_objects o
             WHERE o.project_id = %(project)s AND {ALIAS_MATCH.format(names="%(names)s")}{type_filter}
             ORDER BY o.name, o.key LIMIT {MAX_START_ENTITIES * 5})
            ORDER BY 4, 2""",
        params,
    )
    by_name: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        entity = entity_row(row)
        for name in {entity["name"].casefold(), *row[5]}:
            if name in candidates:
                by_name.setdefault(name, {}).setdefault(entity["id"], entity)
    spans = sorted(
        ((name, candidates[name]) for name in by_name),
        key=lambda item: (-(item[1][1] - item[1][0]), -len(item[0]), item[1][0]),
    )
    taken: list[tuple[int, int]] = []
    chosen: dict[str, dict[str, Any]] = {}
    for name, (start, end) in spans:
        if any(start < t_end and t_start < end for t_start, t_end in taken):
            continue
        taken.append((start, end))
        for entity_id, entity in by_name[name].items():
            chosen.setdefault(entity_id, entity)
    return list(chosen.values())


def _by_ref(project_id: uuid.UUID, ref: str) -> dict[str, Any]:
    """The entity an id or key names, or the one it was merged into (``merged_from``: the ref);
    ``EntityNotFound``."""
    entity, merged_from = entity_resolve_following(project_id=project_id, ref=ref)
    found = {**compact(entity), "properties": entity.get("properties") or {}}
    return found if merged_from is None else {**found, "merged_from": merged_from}


def resolve_one(project_id: uuid.UUID, item: str | StartRef) -> list[dict[str, Any]]:
    if isinstance(item, str):
        try:
            return [_by_ref(project_id, item)]
        except EntityNotFound:
            item = StartRef(name=item)
    type_filter = " AND o.type = %(type)s" if item.type else ""
    if item.key is not None:
        entity = _by_ref(project_id, item.key)
        if item.type and entity["type"] != item.type:
            return []
        return [entity]
    if item.name is not None:
        rows = fetch(
            f"""SELECT {ENTITY_COLUMNS} FROM kb.graph_objects o
                WHERE o.project_id = %(project)s AND lower(o.name) = lower(%(name)s){type_filter}
                ORDER BY o.name, o.key LIMIT {MAX_START_ENTITIES}""",
            {"project": project_id, "name": item.name, "type": item.type},
        )
        if not rows:
            # No entity has that name: one may be known by it (an alias).
            rows = fetch(
                f"""SELECT {ENTITY_COLUMNS} FROM kb.graph_objects o
                    WHERE o.project_id = %(project)s
                      AND {ALIAS_MATCH.format(names="ARRAY[lower(%(name)s)]")}{type_filter}
                    ORDER BY o.name, o.key LIMIT {MAX_START_ENTITIES}""",
                {"project": project_id, "name": item.name, "type": item.type},
            )
        return [entity_row(r) for r in rows]
    if item.search is not None:
        hits = text_search(project_id=project_id, query=item.search, type=item.type, limit=10)
        if not hits:
            return []
        rows = fetch(
            f"SELECT {ENTITY_COLUMNS} FROM kb.graph_objects o WHERE o.id = ANY(%(ids)s)",
            {"ids": [uuid.UUID(h["id"]) for h in hits]},
        )
        order = {h["id"]: i for i, h in enumerate(hits)}
        return sorted((entity_row(r) for r in rows), key=lambda e: order[e["id"]])
    assert item.mentioned_in is not None
    return _mentioned(project_id, item.mentioned_in, item.type)


def start_label(item: str | StartRef) -> str:
    if isinstance(item, str):
        return item
    return next(str(v) for v in (item.name, item.key, item.search, item.mentioned_in) if v is not None)

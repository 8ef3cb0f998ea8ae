"""Reads of the graph structure for the tools: entities, edges, traversal, schema.

Every function is scoped to one project; an entity is named by its id or its import key, resolved
by ``selectors.entity_resolve_following``: the id or key of an entity merged into another names
that other one, and the result says so (``merged_from``, the ref that led there).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection

from apps.core.times import json_time
from apps.graph_tools.search import ENTITY_COLUMNS, entity_row, json_value
from apps.graph_tools.selectors import entity_resolve_following, merged_from_noted


def _fetch(sql: str, params: dict[str, Any] | list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _compact(entity: dict[str, Any]) -> dict[str, Any]:
    return {k: entity[k] for k in ("id", "key", "type", "name")}


def entity_edges(
    *,
    project_id: uuid.UUID,
    entity_id: str,
    direction: str = "both",
    relationship_type: str | None = None,
    limit: int = 100,
) -> dict[str, Any]:
    """The entity and its relationships; ``direction`` "out" (it is the source), "in" or "both".

    A self-loop appears once, as "out". Ordered by type, direction, then the other entity's name.
    ``other`` carries the other entity's properties too (a city's population for "which cities of X
    have more than N inhabitants", without a call per city).
    """
    entity, merged_from = entity_resolve_following(project_id=project_id, ref=entity_id)
    params: dict[str, Any] = {"id": uuid.UUID(entity["id"]), "type": relationship_type, "limit": limit}
    type_filter = " AND r.type = %(type)s" if relationship_type else ""
    parts = []
    if direction in ("out", "both"):
        parts.append(
            f"""SELECT r.id, r.type, 'out' AS direction, r.properties, {ENTITY_COLUMNS}, o.properties
                FROM kb.graph_relationships r JOIN kb.graph_objects o ON o.id = r.dst_id
                WHERE r.src_id = %(id)s {type_filter}"""
        )
    if direction in ("in", "both"):
        self_loop = " AND r.src_id <> r.dst_id" if direction == "both" else ""
        parts.append(
            f"""SELECT r.id, r.type, 'in' AS direction, r.properties, {ENTITY_COLUMNS}, o.properties
                FROM kb.graph_relationships r JOIN kb.graph_objects o ON o.id = r.src_id
                WHERE r.dst_id = %(id)s {type_filter}{self_loop}"""
        )
    sql = " UNION ALL ".join(f"({p})" for p in parts) + " ORDER BY 2, 3, 8, 6 LIMIT %(limit)s"
    edges = [
        {
            "id": str(r[0]),
            "type": r[1],
            "direction": r[2],
            "other": {**_compact(entity_row(r[4:9])), "properties": json_value(r[9]) or {}},
            "properties": json_value(r[3]),
        }
        for r in _fetch(sql, params)
    ]
    return merged_from_noted({"entity": entity, "edges": edges}, merged_from)


def graph_traverse(
    *,
    project_id: uuid.UUID,
    start_entity_id: str,
    max_depth: int = 2,
    relationship_types: Sequence[str] | None = None,
    direction: str = "both",
    limit: int = 200,
) -> dict[str, Any]:
    """Breadth-first walk from an entity, up to ``max_depth`` hops, at most ``limit`` nodes.

    A recursive CTE whose every step is one whole BFS level: the frontier (newly reached
    nodes) and the set of visited nodes travel as arrays, so a node is reached once, at its
    shortest depth (the cycle guard), and a level is expanded only while fewer than ``limit + 1``
    nodes are known. ``truncated`` says that more nodes were reachable than returned. The edges
    are the relationships among the returned nodes that match the type filter.
    """
    start, merged_from = entity_resolve_following(project_id=project_id, ref=start_entity_id)
    params: dict[str, Any] = {
        "project": project_id,
        "start": uuid.UUID(start["id"]),
        "max_depth": max_depth,
        "limit": limit,
        "types": list(relationship_types) if relationship_types else None,
    }
    type_filter = " AND r.type = ANY(%(types)s)" if relationship_types else ""
    steps = []
    if direction in ("out", "both"):
        steps.append(
            f"SELECT r.dst_id AS node FROM kb.graph_relationships r "
            f"WHERE r.src_id = ANY(b.frontier) AND r.project_id = %(project)s{type_filter}"
        )
    if direction in ("in", "both"):
        steps.append(
            f"SELECT r.src_id AS node FROM kb.graph_relationships r "
            f"WHERE r.dst_id = ANY(b.frontier) AND r.project_id = %(project)s{type_filter}"
        )
    sql = f"""
        WITH RECURSIVE bfs(depth, frontier, visited) AS (
            SELECT 0, ARRAY[%(start)s::uuid], ARRAY[%(start)s::uuid]
            UNION ALL
            SELECT b.depth + 1, n.nodes, b.visited || n.nodes
            FROM bfs b
            CROSS JOIN LATERAL (
                SELECT array_agg(DISTINCT s.node) AS nodes
                FROM ({" UNION ALL ".join(steps)}) s
                WHERE NOT (s.node = ANY(b.visited))
            ) n
            WHERE b.depth < %(max_depth)s AND n.nodes IS NOT NULL
              AND cardinality(b.visited) <= %(limit)s
        ),
        reached AS (
            SELECT DISTINCT ON (u.node) u.node, b.depth
            FROM bfs b CROSS JOIN LATERAL unnest(b.frontier) AS u(node)
            ORDER BY u.node, b.depth
        )
        SELECT {ENTITY_COLUMNS}, r.depth, count(*) OVER () AS reached
        FROM reached r JOIN kb.graph_objects o ON o.id = r.node
        ORDER BY r.depth, o.name, o.key
        LIMIT %(limit)s
    """
    rows = _fetch(sql, params)
    reached = int(rows[0][6]) if rows else 0
    nodes = [{**_compact(entity_row(r)), "depth": int(r[5])} for r in rows]
    node_ids = [uuid.UUID(n["id"]) for n in nodes]
    edge_limit = limit * 5
    edge_rows = _fetch(
        f"""SELECT r.id, r.type, r.src_id, r.dst_id FROM kb.graph_relationships r
            WHERE r.src_id = ANY(%(ids)s) AND r.dst_id = ANY(%(ids)s){type_filter}
            ORDER BY r.type, r.src_id, r.dst_id LIMIT %(edge_limit)s""",
        {"ids": node_ids, "types": params["types"], "edge_limit": edge_limit + 1},
    )
    edges = [
        {"id": str(r[0]), "type": r[1], "src_id": str(r[2]), "dst_id": str(r[3])}
        for r in edge_rows[:edge_limit]
    ]
    truncated = reached > limit or len(edge_rows) > edge_limit
    return merged_from_noted({"nodes": nodes, "edges": edges, "truncated": truncated}, merged_from)


def entity_query(
    *,
    project_id: uuid.UUID,
    type: str | None = None,
    properties: dict[str, Any] | None = None,
    limit: int = 50,
    offset: int = 0,
) -> dict[str, Any]:
    """Entities by type and/or exact property values (JSON containment), with the total count."""
    params: dict[str, Any] = {"project": project_id, "limit": limit, "offset": offset}
    where = ""
    if type:
        params["type"] = type
        where += " AND o.type = %(type)s"
    if properties:
        params["props"] = json.dumps(properties)
        where += " AND o.properties @> %(props)s::jsonb"
    rows = _fetch(
        f"""SELECT {ENTITY_COLUMNS}, o.properties, count(*) OVER () AS total
            FROM kb.graph_objects o WHERE o.project_id = %(project)s {where}
            ORDER BY o.type, o.name, o.key LIMIT %(limit)s OFFSET %(offset)s""",
        params,
    )
    if rows:
        total = int(rows[0][6])
    else:
        total = int(
            _fetch(
                f"SELECT count(*) FROM kb.graph_objects o WHERE o.project_id = %(project)s {where}", params
            )[0][0]
        )
    return {"results": [{**entity_row(r), "properties": json_value(r[5])} for r in rows], "total": total}


def entity_type_counts(*, project_id: uuid.UUID) -> list[dict[str, Any]]:
    """Entity types with how many entities each has, most numerous first (from the type counts)."""
    rows = _fetch(
        "SELECT type, count FROM kb.graph_entity_type_counts WHERE project_id = %s ORDER BY count DESC, type",
        [project_id],
    )
    return [{"type": r[0], "count": int(r[1])} for r in rows]


def schema_version(*, project_id: uuid.UUID) -> dict[str, Any]:
    """The sets of entity and relationship types, a version hash of them, the latest change, and the
    project's ontology (#51: its document with ``on_violation``, or null).

    The type sets come from the per-project type counts (migration 0005), the latest change from
    the (project, updated_at) indexes: no part of the graph is scanned.
    """
    rows = _fetch(
        """SELECT
               ARRAY(SELECT type FROM kb.graph_entity_type_counts WHERE project_id = %(p)s ORDER BY type),
               ARRAY(SELECT DISTINCT type FROM kb.graph_relationship_type_counts
                     WHERE project_id = %(p)s ORDER BY type),
               greatest(
                   (SELECT max(updated_at) FROM kb.graph_objects WHERE project_id = %(p)s),
                   (SELECT max(updated_at) FROM kb.graph_relationships WHERE project_id = %(p)s)),
               coalesce((SELECT version FROM kb.graph_versions WHERE project_id = %(p)s), 0),
               (SELECT jsonb_set(document, '{on_violation}', to_jsonb(on_violation))
                  FROM kb.graph_ontologies WHERE project_id = %(p)s AND document IS NOT NULL)""",
        {"p": project_id},
    )
    entity_types, relationship_types, updated = list(rows[0][0]), list(rows[0][1]), rows[0][2]
    digest = hashlib.sha256(
        json.dumps({"entity_types": entity_types, "relationship_types": relationship_types}).encode()
    ).hexdigest()[:16]
    return {
        "version": digest,
        "entity_types": entity_types,
        "relationship_types": relationship_types,
        "updated_at": json_time(updated) if updated else None,
        "graph_version": int(rows[0][3]),
        "ontology": json_value(rows[0][4]),
    }


def relationship_summary(
    *,
    project_id: uuid.UUID,
    relationship_type: str | None = None,
    entity_type: str | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """Relationship types with their counts and the entity types at their source and target ends.

    ``entity_type`` keeps relationships with that type at either end. Read from the per-project
    counts by (relationship type, source type, target type), which triggers keep exact.
    """
    params: dict[str, Any] = {"project": project_id, "limit": limit}
    where = ""
    if relationship_type:
        params["rtype"] = relationship_type
        where += " AND c.type = %(rtype)s"
    if entity_type:
        params["etype"] = entity_type
        where += " AND (c.src_type = %(etype)s OR c.dst_type = %(etype)s)"
    rows = _fetch(
        f"""SELECT c.type, sum(c.count), array_agg(DISTINCT c.src_type ORDER BY c.src_type),
                   array_agg(DISTINCT c.dst_type ORDER BY c.dst_type)
            FROM kb.graph_relationship_type_counts c
            WHERE c.project_id = %(project)s {where}
            GROUP BY c.type ORDER BY sum(c.count) DESC, c.type LIMIT %(limit)s""",
        params,
    )
    return [
        {"type": r[0], "count": int(r[1]), "source_types": list(r[2]), "target_types": list(r[3])}
        for r in rows
    ]

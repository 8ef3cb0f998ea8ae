"""An entity's neighbourhood for the drawing on its page (#51): a capped star of its relationships,
so expanding a node of a hub in a graph of a million entities reads a bounded number of rows.

At most ``SCAN_MAX`` relationships each way are looked at (by the ``src_id``/``dst_id`` indexes),
their other ends' types counted (the drawing's filter), and of those whose other end has one of
``types`` (all, when none are given) the first ``limit`` by type and name are returned."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connection

from apps.curation.graph_selectors import entity_of_project
from apps.projects.selectors import Principal

SCAN_MAX = 2000
LIMIT_MAX = 100
LIMIT_DEFAULT = 40


def neighbourhood(
    *,
    principal: Principal,
    project_ref: object,
    ref: str,
    types: list[str] | None = None,
    limit: int = LIMIT_DEFAULT,
) -> dict[str, Any]:
    """``{"center", "nodes", "edges", "types", "truncated", "scanned", "limit"}`` for the entity
    ``ref`` (an id or key) of a project the principal is a member of."""
    _, entity = entity_of_project(principal=principal, project_ref=project_ref, ref=ref)
    limit = max(1, min(limit, LIMIT_MAX))
    rows = _star(entity.id)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row[4]] = counts.get(row[4], 0) + 1
    wanted = [r for r in rows if not types or r[4] in types]
    wanted.sort(key=lambda r: (r[4], r[5].lower(), str(r[2])))
    nodes: dict[str, dict[str, Any]] = {}
    edges = []
    for direction, rel_id, other_id, other_key, other_type, other_name, rel_type in wanted[:limit]:
        nodes[str(other_id)] = {"id": str(other_id), "key": other_key, "type": other_type, "name": other_name}
        src, dst = (entity.id, other_id) if direction == "out" else (other_id, entity.id)
        edges.append({"id": str(rel_id), "type": rel_type, "src": str(src), "dst": str(dst)})
    center = {"id": str(entity.id), "key": entity.key, "type": entity.type, "name": entity.name}
    return {
        "center": center,
        "nodes": list(nodes.values()),
        "edges": edges,
        "types": dict(sorted(counts.items())),
        "truncated": len(wanted) > limit
        or any(sum(r[0] == d for r in rows) >= SCAN_MAX for d in ("out", "in")),
        "scanned": len(rows),
        "limit": limit,
    }


def _star(entity_id: uuid.UUID) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT 'out', r.id, o.id, o.key, o.type, o.name, r.type
                 FROM (SELECT id, type, dst_id FROM kb.graph_relationships WHERE src_id = %(e)s LIMIT %(scan)s) r
                 JOIN kb.graph_objects o ON o.id = r.dst_id
               UNION ALL
               SELECT 'in', r.id, o.id, o.key, o.type, o.name, r.type
                 FROM (SELECT id, type, src_id FROM kb.graph_relationships WHERE dst_id = %(e)s LIMIT %(scan)s) r
                 JOIN kb.graph_objects o ON o.id = r.src_id""",
            {"e": entity_id, "scan": SCAN_MAX},
        )
        return list(cursor.fetchall())

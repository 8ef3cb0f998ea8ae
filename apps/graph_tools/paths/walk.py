"""Walking a path: one parameterised statement per hop, bounded, with the edges that reach each entity."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.graph_tools.paths.args import (
    HOP_EDGE_LIMIT,
    MAX_START_ENTITIES,
    SQL_OPERATORS,
    Condition,
    Hop,
    StartRef,
    Step,
)
from apps.graph_tools.paths.starts import ENTITY_COLUMNS, compact, entity_row, fetch, resolve_one, start_label

# --- walking ---------------------------------------------------------------------------------


@dataclass
class Walk:
    """One path's walk: the entities at each step and, for each, the edges that reached it."""

    levels: list[dict[str, dict[str, Any]]]  # step -> entity id -> entity (step 0: the starts)
    parents: list[dict[str, list[tuple[str, str, str]]]]  # step -> id -> [(parent id, type, direction)]
    truncation: list[str] = field(default_factory=list)

    @property
    def starts(self) -> dict[str, dict[str, Any]]:
        return self.levels[0]

    @property
    def ends(self) -> dict[str, dict[str, Any]]:
        return self.levels[-1]

    def path(self, entity_id: str) -> list[dict[str, Any]]:
        """The first path (by names) that reaches ``entity_id`` at the last step."""
        steps: list[dict[str, Any]] = []
        current = entity_id
        for level in range(len(self.levels) - 1, 0, -1):
            parent, rel, direction = self.parents[level][current][0]
            steps.append(
                {"relationship": rel, "direction": direction, "entity": compact(self.levels[level][current])}
            )
            current = parent
        steps.append({"entity": compact(self.levels[0][current])})
        return steps[::-1]


def _conditions(conditions: Sequence[Condition], params: dict[str, Any], prefix: str) -> str:
    sql = ""
    for i, condition in enumerate(conditions):
        name, value = f"{prefix}p{i}", f"{prefix}v{i}"
        op = SQL_OPERATORS[condition.op]
        params[name] = condition.property
        if isinstance(condition.value, bool):
            params[value] = "true" if condition.value else "false"
            sql += f" AND (o.properties -> %({name})s) {op} %({value})s::jsonb"
        elif isinstance(condition.value, int | float):
            params[value] = condition.value
            sql += (
                f" AND jsonb_typeof(o.properties -> %({name})s) = 'number'"
                f" AND (o.properties ->> %({name})s)::numeric {op} %({value})s"
            )
        else:
            params[value] = condition.value
            sql += f" AND (o.properties ->> %({name})s) {op} %({value})s"
    return sql


def _hop(
    frontier: list[str], hop: Step, starts: list[str], members: set[str] | None, project_id: uuid.UUID
) -> tuple[list[tuple[Any, ...]], bool]:
    """The edges of one hop from ``frontier`` to entities that pass its filters (at most the limit)."""
    params: dict[str, Any] = {
        "project": project_id,
        "frontier": [uuid.UUID(i) for i in frontier],
        "starts": [uuid.UUID(i) for i in starts],
        "rel": hop.relationship,
        "type": hop.type,
        "limit": HOP_EDGE_LIMIT + 1,
    }
    rel_filter = " AND r.type = %(rel)s" if hop.relationship else ""
    branches = []
    if hop.direction in ("out", "both"):
        branches.append(
            f"""SELECT r.src_id AS parent, r.dst_id AS child, r.type, 'out' AS direction
                FROM kb.graph_relationships r
                WHERE r.src_id = ANY(%(frontier)s) AND r.project_id = %(project)s{rel_filter}"""
        )
    if hop.direction in ("in", "both"):
        # A self-loop is followed once, as "out".
        self_loop = " AND r.src_id <> r.dst_id" if hop.direction == "both" else ""
        branches.append(
            f"""SELECT r.dst_id AS parent, r.src_id AS child, r.type, 'in' AS direction
                FROM kb.graph_relationships r
                WHERE r.dst_id = ANY(%(frontier)s) AND r.project_id = %(project)s{rel_filter}{self_loop}"""
        )
    where = " AND o.type = %(type)s" if hop.type else ""
    where += _conditions(hop.where, params, "c")
    if members is not None:
        params["members"] = [uuid.UUID(i) for i in members]
        where += " AND o.id = ANY(%(members)s)"
    rows = fetch(
        f"""SELECT e.parent, e.type, e.direction, {ENTITY_COLUMNS}
            FROM ({" UNION ALL ".join(branches)}) e JOIN kb.graph_objects o ON o.id = e.child
            WHERE NOT (o.id = ANY(%(starts)s)){where}
            ORDER BY o.name, o.key, e.parent, e.type, e.direction
            LIMIT %(limit)s""",
        params,
    )
    return rows[:HOP_EDGE_LIMIT], len(rows) > HOP_EDGE_LIMIT


def path_walk(
    project_id: uuid.UUID,
    starts: list[dict[str, Any]],
    hops: Sequence[Step],
    missing: list[str],
    label: str = "",
) -> Walk:
    """Follow ``hops`` from ``starts``; start refs of an ``in_path`` that named nothing join ``missing``."""
    walk = Walk(levels=[{e["id"]: e for e in starts}], parents=[{}])
    start_ids = list(walk.starts)
    for index, hop in enumerate(hops, start=1):
        members = None
        if isinstance(hop, Hop) and hop.in_path is not None:
            sub_starts, sub_missing = starts_resolve(project_id, hop.in_path.start)
            missing += sub_missing
            sub = path_walk(
                project_id, sub_starts, hop.in_path.hops, missing, label=f"{label}hop {index}'s in_path: "
            )
            walk.truncation.extend(sub.truncation)
            members = set(sub.ends)
        frontier = list(walk.levels[-1])
        rows, cut = _hop(frontier, hop, start_ids, members, project_id) if frontier else ([], False)
        if cut:
            walk.truncation.append(
                f"{label}hop {index} followed only the first {HOP_EDGE_LIMIT:,} relationships: "
                "the entities after it, and the counts, are incomplete"
            )
        level: dict[str, dict[str, Any]] = {}
        parents: dict[str, list[tuple[str, str, str]]] = {}
        for row in rows:
            entity = entity_row(row[3:])
            level.setdefault(entity["id"], entity)
            parents.setdefault(entity["id"], []).append((str(row[0]), row[1], row[2]))
        previous = walk.levels[-1]
        for edges in parents.values():
            # The first path of an entity is the one through the first names.
            edges.sort(key=lambda e: (previous[e[0]]["name"].casefold(), previous[e[0]]["key"], e[1], e[2]))
        walk.levels.append(level)
        walk.parents.append(parents)
    return walk


def starts_resolve(
    project_id: uuid.UUID, items: Sequence[str | StartRef]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The start entities of ``items`` (each once) and the items that named none."""
    found: dict[str, dict[str, Any]] = {}
    missing: list[str] = []
    for item in items:
        entities = resolve_one(project_id, item)
        if not entities:
            missing.append(start_label(item))
        for entity in entities:
            if len(found) < MAX_START_ENTITIES:
                found.setdefault(entity["id"], entity)
    return list(found.values()), missing

"""Running a path query and shaping its result: entities with their paths, count, exists, groups, min/max."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import OperationalError, connection, transaction

from apps.graph_tools.paths.args import STATEMENT_TIMEOUT_MS, PathQueryTimeout, QueryPathsArgs, types_check
from apps.graph_tools.paths.starts import compact
from apps.graph_tools.paths.walk import Walk, path_walk, starts_resolve
from apps.graph_tools.selectors import graph_vocabulary

# --- the result ------------------------------------------------------------------------------


def _order(entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entities, key=lambda e: (e["name"].casefold(), e["key"]))


def _number(entity: dict[str, Any], prop: str) -> float | None:
    value = (entity.get("properties") or {}).get(prop)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _groups(walk: Walk, group_by: int, limit: int) -> list[dict[str, Any]]:
    """The result entities grouped by the entity at step ``group_by`` that reaches them.

    At the last step itself, each result entity is a group of the entities of the step before it.
    """
    last = len(walk.levels) - 1
    by_group: dict[str, set[str]] = {}
    if group_by == last:
        member_level, group_level = walk.levels[last - 1], walk.ends
        for entity in walk.ends:
            by_group[entity] = {parent for parent, _, _ in walk.parents[last][entity]}
    else:
        member_level, group_level = walk.ends, walk.levels[group_by]
        # For every entity of each step, the group entities (at step group_by) it is reached from.
        origin: dict[str, set[str]] = {e: {e} for e in group_level}
        for level in range(group_by + 1, last + 1):
            origin = {
                e: set().union(*(origin.get(p, set()) for p, _, _ in walk.parents[level][e]))
                for e in walk.levels[level]
            }
        for entity, groups in origin.items():
            for group in groups:
                by_group.setdefault(group, set()).add(entity)
    out = []
    for group_id in [g["id"] for g in _order(list(group_level.values()))]:
        members = _order([member_level[m] for m in by_group.get(group_id, set())])
        if members:
            out.append(
                {
                    "entity": compact(group_level[group_id]),
                    "count": len(members),
                    "members": [compact(m) for m in members[:limit]],
                }
            )
    return out


def paths_query(*, project_id: uuid.UUID, args: QueryPathsArgs) -> dict[str, Any]:
    """Run a path query on one project (see the module's docstring); ``ToolError`` when it cannot."""
    types_check(args, graph_vocabulary(project_id=project_id))
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('statement_timeout', %s, true)", [str(STATEMENT_TIMEOUT_MS)]
                )
            return _run(project_id, args)
    except OperationalError as exc:
        if type(exc.__cause__).__name__ == "QueryCanceled":
            raise PathQueryTimeout(
                f"the path query took longer than {STATEMENT_TIMEOUT_MS / 1000:g} s; narrow it "
                "(name relationship and entity types, fewer or more precise starts)"
            ) from None
        raise


def _run(project_id: uuid.UUID, args: QueryPathsArgs) -> dict[str, Any]:
    walks, starts, missing = _walks(project_id, args)
    ends = dict(walks[0].ends)
    for other in walks[1:]:
        ends = {k: v for k, v in ends.items() if k in other.ends}
    entities = _order(list(ends.values()))
    if args.result in ("min", "max") and args.property is not None:
        prop = args.property
        entities = [e for e in entities if _number(e, prop) is not None]
        entities.sort(key=lambda e: _number(e, prop) or 0, reverse=args.result == "max")
    truncation = [t for w in walks for t in w.truncation]
    if len(entities) > args.limit:
        truncation.append(f"the results list the first {args.limit} of {len(entities)} entities (limit)")
    results = []
    for entity in entities[: args.limit]:
        item: dict[str, Any] = {**entity, "path": walks[0].path(entity["id"])}
        if len(walks) > 1:
            item["also"] = [w.path(entity["id"]) for w in walks[1:]]
        results.append(item)
    out: dict[str, Any] = {
        # A start named by the id or key of an entity since merged into it says so.
        "start": [
            compact(s) | ({"merged_from": s["merged_from"]} if "merged_from" in s else {}) for s in starts
        ],
        "not_found": missing,
        "results": results,
        "count": len(entities),
    }
    _shape(out, args, walks, ends, entities, truncation)
    out["truncated"] = bool(truncation)
    if truncation:
        out["truncation"] = truncation
    return out


def _walks(project_id: uuid.UUID, args: QueryPathsArgs) -> tuple[list[Walk], list[dict[str, Any]], list[str]]:
    """One walk per start (``start_match`` "all": their results are intersected) or one for all."""
    groups = [[item] for item in args.start] if args.start_match == "all" else [list(args.start)]
    walks: list[Walk] = []
    starts: list[dict[str, Any]] = []
    missing: list[str] = []
    for items in groups:
        entities, absent = starts_resolve(project_id, items)
        missing += absent
        starts += [e for e in entities if e["id"] not in {s["id"] for s in starts}]
        walks.append(path_walk(project_id, entities, args.hops, missing))
    return walks, starts, missing


def _shape(
    out: dict[str, Any],
    args: QueryPathsArgs,
    walks: list[Walk],
    ends: dict[str, dict[str, Any]],
    entities: list[dict[str, Any]],
    truncation: list[str],
) -> None:
    """Add the asked shape beyond the entities: exists, groups, or the min/max value."""
    if args.result == "exists":
        out["exists"] = bool(entities)
    elif args.result == "group":
        group_by = args.group_by if args.group_by is not None else len(args.hops) - 1
        if len(walks) > 1:
            for walk in walks:
                walk.levels[-1] = {k: v for k, v in walk.ends.items() if k in ends}
        out["groups"] = _groups(walks[0], group_by, args.limit)
        if len(out["groups"]) > args.limit:
            truncation.append(f"the groups list the first {args.limit} of {len(out['groups'])} (limit)")
            out["groups"] = out["groups"][: args.limit]
    elif args.result in ("min", "max") and args.property is not None:
        value = _number(entities[0], args.property) if entities else None
        out[args.result] = {
            "property": args.property,
            "value": value,
            "entities": [compact(e) for e in entities if _number(e, args.property) == value],
        }

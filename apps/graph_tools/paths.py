"""``query_paths``: a declarative path query, for answers of any shape (PROTOCOL §6).

A query names its start entities (by name, key or id, a search, or the names a text mentions),
follows up to ``MAX_HOPS`` hops (a relationship type or any, in a direction) with filters at any
step (an entity type, a property compared with a value, membership in another path's result), and
shapes the result: the entities with the path that reaches each, their count, whether any exists,
groups with counts, or the minimum or maximum of a numeric property.

A path never passes through its own start entities again: "who co-starred with X" does not answer
X, "the neighbours of Benin's neighbours" does not answer Benin. (This is also how MetaQA's answers
are defined: its dev answers are reproduced exactly by it.)

Bounds: every value from the caller is a query parameter (relationship and entity types, property
names and values; the comparison operators are chosen from a fixed table); one hop follows at most
``HOP_EDGE_LIMIT`` relationships (more: ``truncated``, and the reason says which hop); every
statement runs under a ``STATEMENT_TIMEOUT_MS`` timeout; an unknown relationship or entity type is
an ``invalid_arguments`` error naming the argument and the project's types.
"""

from __future__ import annotations

import re
import string
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from django.db import OperationalError, connection, transaction
from pydantic import Field, StringConstraints, model_validator

from apps.graph_tools.errors import ToolArgumentError, ToolError
from apps.graph_tools.registry import GraphVocabulary, ToolArgs
from apps.graph_tools.search import json_value, text_search
from apps.graph_tools.selectors import entity_resolve, graph_vocabulary
from apps.projects.selectors import parse_uuid

MAX_HOPS = 4
MAX_STARTS = 20
# Start entities of one query in all (a name many entities share, a broad search).
MAX_START_ENTITIES = 200
# Relationships one hop may follow; beyond them the hop is cut and the result says so.
HOP_EDGE_LIMIT = 10_000
STATEMENT_TIMEOUT_MS = 10_000
# A text's names: word sequences of at most this many words, from its first MENTION_TEXT_CHARS.
MENTION_MAX_WORDS = 12
MENTION_TEXT_CHARS = 2000
# Relationship triples listed in a project's schema (the rest: list_relationships).
SCHEMA_TRIPLES = 200
# Types offered as an enum in a project's schema; a project with more gets free strings.
SCHEMA_ENUM_MAX = 500

TypeName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MENTION_TEXT_CHARS)]
Ref = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=512)]
PropertyName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Direction = Literal["out", "in", "both"]
Operator = Literal["=", "!=", "<", "<=", ">", ">="]
Shape = Literal["entities", "count", "exists", "group", "min", "max"]

# The only SQL text an operator becomes.
_SQL_OPERATORS: dict[str, str] = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


class StartRef(ToolArgs):
    """Start entities: exactly one of ``name``, ``key``, ``search``, ``mentioned_in``."""

    name: Ref | None = Field(
        default=None, description="An entity name (case aside): every entity of that name."
    )
    key: Ref | None = Field(default=None, description="An entity id or key (from a previous result).")
    search: Text | None = Field(
        default=None, description="Keywords: the best full-text matches (at most 10)."
    )
    mentioned_in: Text | None = Field(
        default=None,
        description="A text (a question): the entities whose whole names it contains, longest names first.",
    )
    type: TypeName | None = Field(default=None, description="Only start entities of this type.")

    @model_validator(mode="after")
    def _one_way(self) -> StartRef:
        given = [k for k in ("name", "key", "search", "mentioned_in") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of name, key, search, mentioned_in")
        return self


StartItem = Annotated[
    Ref | StartRef,
    Field(
        description='An entity\'s name, key or id as a string, or {"name"|"key"|"search"|"mentioned_in": …, "type"?}.'
    ),
]


class Condition(ToolArgs):
    """A property of the entity at this step compared with a value (entities without it never match)."""

    property: PropertyName
    op: Operator = "="
    value: bool | int | float | Annotated[str, StringConstraints(max_length=1000)] = Field(
        description="A number compares as a number, a string as text, true/false as a boolean."
    )


class Step(ToolArgs):
    """One hop: follow a relationship, then keep the entities that pass the filters."""

    relationship: TypeName | None = Field(default=None, description="The relationship type; omitted: any.")
    direction: Direction = Field(
        default="both", description='"out": from source to target; "in": backwards; "both" (default).'
    )
    type: TypeName | None = Field(default=None, description="Keep only entities of this type.")
    where: list[Condition] = Field(
        default_factory=list, max_length=5, description="Property filters (all must hold)."
    )


class SubPath(ToolArgs):
    """Another path, whose result entities a hop's entities must be among (an intersection)."""

    start: list[StartItem] = Field(min_length=1, max_length=MAX_STARTS)
    hops: list[Step] = Field(default_factory=list, max_length=MAX_HOPS)


class Hop(Step):
    in_path: SubPath | None = Field(
        default=None,
        description="Keep only entities this other path reaches (e.g. the countries that use the Naira: "
        '{"start": ["Naira"], "hops": [{"relationship": "USES_CURRENCY"}]}).',
    )


class QueryPathsArgs(ToolArgs):
    start: list[StartItem] = Field(min_length=1, max_length=MAX_STARTS, description="Where the paths begin.")
    start_match: Literal["any", "all"] = Field(
        default="any",
        description='"any": results reached from any start; "all": only those reached from every start '
        "(the countries that border both A and B).",
    )
    hops: list[Hop] = Field(default_factory=list, max_length=MAX_HOPS, description="Up to 4 hops, in order.")
    result: Shape = Field(
        default="entities",
        description='"entities" (default), "count", "exists" (yes/no), "group" (the results grouped by the '
        'entity at step group_by, with counts: each neighbour\'s currency), "min"/"max" (of property).',
    )
    group_by: int | None = Field(
        default=None,
        ge=0,
        le=MAX_HOPS,
        description="For group: the step whose entities are the groups "
        "(0: the start; default: the step before the last).",
    )
    property: PropertyName | None = Field(default=None, description="For min/max: a numeric property.")
    limit: int = Field(
        default=50, ge=1, le=500, description="Most result entities (and group members) listed."
    )

    @model_validator(mode="after")
    def _shape(self) -> QueryPathsArgs:
        if self.result in ("min", "max") and self.property is None:
            raise ValueError(f'result "{self.result}" needs a property')
        if self.result == "group" and not self.hops:
            raise ValueError('result "group" needs at least one hop')
        if self.group_by is not None and (self.result != "group" or self.group_by > len(self.hops)):
            raise ValueError("group_by is a step of the path (0 to the number of hops), for result group")
        return self


class PathQueryTimeout(ToolError):
    """The query ran longer than its statement timeout."""

    code = "query_timeout"


# --- the project's types ---------------------------------------------------------------------


def paths_schema(schema: dict[str, Any], vocabulary: GraphVocabulary) -> dict[str, Any]:
    """``query_paths``' JSON Schema narrowed to a project: its relationship and entity types as enums.

    The relationship's description lists the graph's relationships as ``Source -TYPE-> Target``
    (at most ``SCHEMA_TRIPLES``), so a model sees which way each one goes. A project with no types
    yet, or more than ``SCHEMA_ENUM_MAX``, keeps free strings (the handler still checks them).
    """
    rel_types = list(vocabulary.relationship_types)
    entity_types = list(vocabulary.entity_types)
    triples = "; ".join(f"{s} -{t}-> {d}" for t, s, d in vocabulary.relationships[:SCHEMA_TRIPLES])
    more = len(vocabulary.relationships) - SCHEMA_TRIPLES
    if more > 0:
        triples += f"; and {more} more (list_relationships)"

    def narrow(node: dict[str, Any], enum: list[str], description: str | None = None) -> None:
        if not enum or len(enum) > SCHEMA_ENUM_MAX:
            return
        for branch in node.get("anyOf", [node]):
            if branch.get("type") == "string":
                branch.clear()
                branch.update({"type": "string", "enum": enum})
        if description:
            node["description"] = description

    for name, definition in (schema.get("$defs") or {}).items():
        properties = definition.get("properties") or {}
        if name in {"Step", "Hop"}:
            narrow(
                properties["relationship"],
                rel_types,
                f"The relationship type; omitted: any. This graph's relationships: {triples}."
                if triples
                else None,
            )
        if name in {"Step", "Hop", "StartRef"}:
            narrow(properties["type"], entity_types)
    return schema


def _check_types(args: QueryPathsArgs, vocabulary: GraphVocabulary) -> None:
    """``ToolArgumentError`` naming the first relationship or entity type the project does not have."""
    relationships = set(vocabulary.relationship_types)
    types = set(vocabulary.entity_types)

    def starts(items: Sequence[str | StartRef], at: str) -> None:
        for i, item in enumerate(items):
            if isinstance(item, StartRef) and item.type is not None and item.type not in types:
                unknown("entity type", item.type, f"{at}.{i}.type", types)

    def hops(items: Sequence[Step], at: str) -> None:
        for i, hop in enumerate(items):
            if hop.relationship is not None and hop.relationship not in relationships:
                unknown("relationship type", hop.relationship, f"{at}.{i}.relationship", relationships)
            if hop.type is not None and hop.type not in types:
                unknown("entity type", hop.type, f"{at}.{i}.type", types)
            if isinstance(hop, Hop) and hop.in_path is not None:
                starts(hop.in_path.start, f"{at}.{i}.in_path.start")
                hops(hop.in_path.hops, f"{at}.{i}.in_path.hops")

    def unknown(what: str, value: str, argument: str, known: set[str]) -> None:
        listed = ", ".join(sorted(known)[:60]) or "none yet"
        raise ToolArgumentError(
            f"invalid arguments for query_paths: {argument}: unknown {what} {value!r}; this graph's: {listed}",
            argument=argument,
        )

    starts(args.start, "start")
    hops(args.hops, "hops")


# --- resolving the starts --------------------------------------------------------------------

_ENTITY = "o.id, o.key, o.type, o.name, o.properties"
_EDGE_PUNCTUATION = string.punctuation + "¿¡“”‘’«»…"
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)


def _entity(row: Sequence[Any]) -> dict[str, Any]:
    return {
        "id": str(row[0]),
        "key": row[1],
        "type": row[2],
        "name": row[3],
        "properties": json_value(row[4]) or {},
    }


def _compact(entity: dict[str, Any]) -> dict[str, Any]:
    return {k: entity[k] for k in ("id", "key", "type", "name")}


def _fetch(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _mention_candidates(text: str) -> dict[str, tuple[int, int]]:
    """Every word sequence of ``text`` (up to ``MENTION_MAX_WORDS``), lower case, with its span.

    Each also without the punctuation at its ends and without a possessive "'s" ("Ghana's"), so a
    name at the end of a question ("… of Ghana?") or in casual phrasing is found; the widest span
    of a candidate is kept.
    """
    words = text[:MENTION_TEXT_CHARS].split()
    found: dict[str, tuple[int, int]] = {}
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + MENTION_MAX_WORDS) + 1):
            raw = " ".join(words[i:j])
            stripped = raw.strip(_EDGE_PUNCTUATION)
            for variant in {raw, stripped, _POSSESSIVE.sub("", stripped)}:
                variant = variant.casefold()
                if variant and variant.strip(_EDGE_PUNCTUATION):
                    found.setdefault(variant, (i, j))
    return found


def _mentioned(project_id: uuid.UUID, text: str, type_: str | None) -> list[dict[str, Any]]:
    """The entities whose whole names ``text`` contains: the longest names first, overlaps left out."""
    candidates = _mention_candidates(text)
    if not candidates:
        return []
    params: dict[str, Any] = {"project": project_id, "names": list(candidates), "type": type_}
    type_filter = " AND o.type = %(type)s" if type_ else ""
    rows = _fetch(
        f"""SELECT {_ENTITY} FROM kb.graph_objects o
            WHERE o.project_id = %(project)s AND lower(o.name) = ANY(%(names)s){type_filter}
            ORDER BY o.name, o.key LIMIT {MAX_START_ENTITIES * 5}""",
        params,
    )
    by_name: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        entity = _entity(row)
        by_name.setdefault(entity["name"].casefold(), []).append(entity)
    spans = sorted(
        ((name, candidates[name]) for name in by_name if name in candidates),
        key=lambda item: (-(item[1][1] - item[1][0]), -len(item[0]), item[1][0]),
    )
    taken: list[tuple[int, int]] = []
    chosen: list[dict[str, Any]] = []
    for name, (start, end) in spans:
        if any(start < t_end and t_start < end for t_start, t_end in taken):
            continue
        taken.append((start, end))
        chosen.extend(by_name[name])
    return chosen


def _resolve_one(project_id: uuid.UUID, item: str | StartRef) -> list[dict[str, Any]]:
    if isinstance(item, str):
        by_ref = _fetch(
            f"""SELECT {_ENTITY} FROM kb.graph_objects o
                WHERE o.project_id = %(project)s AND (o.key = %(ref)s OR o.id = %(id)s)
                ORDER BY (o.id = %(id)s) DESC NULLS LAST LIMIT 1""",
            {"project": project_id, "ref": item, "id": parse_uuid(item)},
        )
        if by_ref:
            return [_entity(by_ref[0])]
        item = StartRef(name=item)
    type_filter = " AND o.type = %(type)s" if item.type else ""
    if item.key is not None:
        entity = entity_resolve(project_id=project_id, ref=item.key)
        if item.type and entity["type"] != item.type:
            return []
        return [{**_compact(entity), "properties": entity.get("properties") or {}}]
    if item.name is not None:
        rows = _fetch(
            f"""SELECT {_ENTITY} FROM kb.graph_objects o
                WHERE o.project_id = %(project)s AND lower(o.name) = lower(%(name)s){type_filter}
                ORDER BY o.name, o.key LIMIT {MAX_START_ENTITIES}""",
            {"project": project_id, "name": item.name, "type": item.type},
        )
        return [_entity(r) for r in rows]
    if item.search is not None:
        hits = text_search(project_id=project_id, query=item.search, type=item.type, limit=10)
        if not hits:
            return []
        rows = _fetch(
            f"SELECT {_ENTITY} FROM kb.graph_objects o WHERE o.id = ANY(%(ids)s)",
            {"ids": [uuid.UUID(h["id"]) for h in hits]},
        )
        order = {h["id"]: i for i, h in enumerate(hits)}
        return sorted((_entity(r) for r in rows), key=lambda e: order[e["id"]])
    assert item.mentioned_in is not None
    return _mentioned(project_id, item.mentioned_in, item.type)


def _label(item: str | StartRef) -> str:
    if isinstance(item, str):
        return item
    return next(str(v) for v in (item.name, item.key, item.search, item.mentioned_in) if v is not None)


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
                {"relationship": rel, "direction": direction, "entity": _compact(self.levels[level][current])}
            )
            current = parent
        steps.append({"entity": _compact(self.levels[0][current])})
        return steps[::-1]


def _conditions(conditions: Sequence[Condition], params: dict[str, Any], prefix: str) -> str:
    sql = ""
    for i, condition in enumerate(conditions):
        name, value = f"{prefix}p{i}", f"{prefix}v{i}"
        op = _SQL_OPERATORS[condition.op]
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
    rows = _fetch(
        f"""SELECT e.parent, e.type, e.direction, {_ENTITY}
            FROM ({" UNION ALL ".join(branches)}) e JOIN kb.graph_objects o ON o.id = e.child
            WHERE NOT (o.id = ANY(%(starts)s)){where}
            ORDER BY o.name, o.key, e.parent, e.type, e.direction
            LIMIT %(limit)s""",
        params,
    )
    return rows[:HOP_EDGE_LIMIT], len(rows) > HOP_EDGE_LIMIT


def _walk(
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
            sub_starts, sub_missing = _resolve(project_id, hop.in_path.start)
            missing += sub_missing
            sub = _walk(
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
            entity = _entity(row[3:])
            level.setdefault(entity["id"], entity)
            parents.setdefault(entity["id"], []).append((str(row[0]), row[1], row[2]))
        previous = walk.levels[-1]
        for edges in parents.values():
            # The first path of an entity is the one through the first names.
            edges.sort(key=lambda e: (previous[e[0]]["name"].casefold(), previous[e[0]]["key"], e[1], e[2]))
        walk.levels.append(level)
        walk.parents.append(parents)
    return walk


def _resolve(
    project_id: uuid.UUID, items: Sequence[str | StartRef]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The start entities of ``items`` (each once) and the items that named none."""
    found: dict[str, dict[str, Any]] = {}
    missing: list[str] = []
    for item in items:
        entities = _resolve_one(project_id, item)
        if not entities:
            missing.append(_label(item))
        for entity in entities:
            if len(found) < MAX_START_ENTITIES:
                found.setdefault(entity["id"], entity)
    return list(found.values()), missing


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
                    "entity": _compact(group_level[group_id]),
                    "count": len(members),
                    "members": [_compact(m) for m in members[:limit]],
                }
            )
    return out


def paths_query(*, project_id: uuid.UUID, args: QueryPathsArgs) -> dict[str, Any]:
    """Run a path query on one project (see the module's docstring); ``ToolError`` when it cannot."""
    _check_types(args, graph_vocabulary(project_id=project_id))
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
    groups = [[item] for item in args.start] if args.start_match == "all" else [list(args.start)]
    walks: list[Walk] = []
    starts: list[dict[str, Any]] = []
    missing: list[str] = []
    for items in groups:
        entities, absent = _resolve(project_id, items)
        missing += absent
        starts += [e for e in entities if e["id"] not in {s["id"] for s in starts}]
        walks.append(_walk(project_id, entities, args.hops, missing))
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
        "start": [_compact(s) for s in starts],
        "not_found": missing,
        "results": results,
        "count": len(entities),
    }
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
            "entities": [_compact(e) for e in entities if _number(e, args.property) == value],
        }
    out["truncated"] = bool(truncation)
    if truncation:
        out["truncation"] = truncation
    return out

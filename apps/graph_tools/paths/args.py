"""``query_paths``' arguments, their bounds, and the project's types as the schema's enums."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, model_validator

from apps.graph_tools.errors import ToolArgumentError, ToolError
from apps.graph_tools.names import MENTION_TEXT_CHARS
from apps.graph_tools.registry import GraphVocabulary, ToolArgs

MAX_HOPS = 4
MAX_STARTS = 20
# Start entities of one query in all (a name many entities share, a broad search).
MAX_START_ENTITIES = 200
# Relationships one hop may follow; beyond them the hop is cut and the result says so.
HOP_EDGE_LIMIT = 10_000
STATEMENT_TIMEOUT_MS = 10_000
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
SQL_OPERATORS: dict[str, str] = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


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


def types_check(args: QueryPathsArgs, vocabulary: GraphVocabulary) -> None:
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

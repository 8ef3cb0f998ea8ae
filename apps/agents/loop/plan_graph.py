"""The small-model loop plans its look-up as one path query (issue #25): the graph and the names.

Measured on MetaQA with Qwen2.5-Coder-1.5B (``docs/evals.md``): asked for the hops of "who
directed the films starred by X" as a free list, or for the whole typed path of this graph, the
model often wrote one hop, hops that do not connect, or the wrong middle relationship; asked only
for the start, the type asked for and the relationships the question goes through (its own
words, which it maps to relationship names well), it was right far more often, and faster. The
loop finds the path. So:

1. **the loop looks up the entities the question names** itself (no model step): ``query_paths``
   with ``{"mentioned_in": <question>}`` and no hops (a follow-up that names none: the previous
   question's); lower-case common words the graph also has ("actors", "fall") are dropped beside
   a real name;
2. **the model writes a plan** under a JSON Schema built from those entities and the graph's
   relationships (read from ``query_paths``' own schema, which lists them as ``Source -TYPE->
   Target``): the answer's shape (list, count, yes/no, each, largest, smallest), the start (one of
   the named entities), the type asked for, the relationships in the order the question mentions
   them, and optionally a second named entity the answers must also be reached from (an
   intersection: "border both A and B", "neighbours that use the Naira", "does A border B"); the
   question's words that name the graph's types and relationships are given as hints;
3. **the loop chooses the typed paths** from the start's type that fit best (``path_rank``: the
   relationships mentioned, counted with repeats, and the type asked for; a relationship named
   once is followed there and back when the type asked for needs it), runs those that tie as
   ``query_paths`` calls in one step, and shows the first that found something to the answer step
   as **cards** (``plan_card``): the path, then the entities it reached, their counts, groups, the
   yes/no or the ranking; a long list is added whole after the model's sentence.

Nothing here knows a question template: what varies is read from the graph (its types and
relationships) and from the question (the names and words it contains). ``turn.SmallModelTurn``
calls these functions (``plan_turn.next_move``); everything else of the loop stays where it was.

This module reads the graph (its relationships, from the path tool's schema; the typed paths
from a type) and the names a question mentions; ``plan`` is the plan step and its schemas,
``plan_turn`` the turn's moves and the cards the answer reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from apps.agents.llm.base import ToolSpec

# Paths the plan may choose: at most this many hops, and this many paths per start type (the
# shortest kept when a graph has more).
PLAN_MAX_HOPS = 3
PLAN_MAX_PATHS = 400
# Named entities offered as starts (the longest names first).
PLAN_MAX_STARTS = 4
# Result entities the answer step reads one by one; beyond them the loop adds the full list.
CARD_SHOWN = 12
PLAN_MAX_TOKENS = 120
SHAPE_MAX_TOKENS = 12
# Typed paths that fit a plan equally well are all run; the answer reads the first that finds something.
MAX_CANDIDATES = 3
SHAPES = ("list", "count", "yes/no", "each", "largest", "smallest")
RESULT_SHAPES = {
    "list": "entities",
    "count": "count",
    "yes/no": "exists",
    "each": "group",
    "largest": "max",
    "smallest": "min",
}


def path_tool(tools: Sequence[ToolSpec]) -> ToolSpec | None:
    """The offered tool that runs path queries: it takes a ``start`` and ``hops``."""
    for tool in tools:
        properties = tool.parameters.get("properties") or {}
        if "start" in properties and "hops" in properties:
            return tool
    return None


# --- the graph's relationships, from the tool's own schema -----------------------------------


@dataclass(frozen=True)
class Relationship:
    type: str
    source: str
    target: str


def _hop_schema(tool: ToolSpec) -> dict[str, Any]:
    defs = tool.parameters.get("$defs") or tool.parameters.get("definitions") or {}
    return (defs.get("Hop") or {}).get("properties") or {}


def _enum(node: dict[str, Any]) -> list[str]:
    for branch in node.get("anyOf", [node]):
        if isinstance(branch, dict) and isinstance(branch.get("enum"), list):
            return [str(v) for v in branch["enum"]]
    return []


def graph_relationships(tool: ToolSpec) -> list[Relationship]:
    """The project's relationships as the path tool's schema lists them (``Source -TYPE-> Target``).

    The relationship and entity types are the schema's enums, so a type name with spaces or
    punctuation is still read whole; a schema without them (an empty graph) gives none.
    """
    hop = _hop_schema(tool)
    types = _enum(hop.get("type") or {})
    relationships = _enum(hop.get("relationship") or {})
    description = str((hop.get("relationship") or {}).get("description") or "")
    _, _, listing = description.partition("relationships: ")
    found = []
    for part in listing.rstrip(".").split("; "):
        for rel in relationships:
            source, arrow, target = part.partition(f" -{rel}-> ")
            if arrow and source in types and target in types:
                found.append(Relationship(rel, source, target))
    return found


@dataclass(frozen=True)
class PathOption:
    """A typed path from a start type: its hops ``(relationship, direction, type reached)``."""

    start: str
    hops: tuple[tuple[str, str, str], ...] = ()

    @property
    def end(self) -> str:
        return self.hops[-1][2] if self.hops else self.start

    @property
    def text(self) -> str:
        """The path read from the start: "Country -USES_CURRENCY-> Currency"."""
        parts = [self.start]
        for rel, direction, target in self.hops:
            parts += [f"-{rel}->" if direction == "out" else f"<-{rel}-", target]
        return " ".join(parts)


def typed_paths(
    start: str, relationships: Sequence[Relationship], max_hops: int = PLAN_MAX_HOPS
) -> list[PathOption]:
    """Every connected path of at most ``max_hops`` from ``start`` (the empty path first), shortest
    first, at most ``PLAN_MAX_PATHS``."""
    options = [PathOption(start)]
    frontier = list(options)
    for _ in range(max_hops):
        grown = []
        for option in frontier:
            for r in relationships:
                if r.source == option.end:
                    grown.append(PathOption(start, (*option.hops, (r.type, "out", r.target))))
                if r.target == option.end:
                    grown.append(PathOption(start, (*option.hops, (r.type, "in", r.source))))
        if len(options) + len(grown) > PLAN_MAX_PATHS:
            break
        options += grown
        frontier = grown
    return options


# --- the named entities ------------------------------------------------------------------------


@dataclass(frozen=True)
class Mention:
    """An entity the question names: its name, type and key, and its numeric properties."""

    name: str
    type: str
    keys: tuple[str, ...]
    numbers: tuple[str, ...] = ()


def mention_lookup(text: str) -> dict[str, Any]:
    """The arguments of the loop's look-up of the entities ``text`` names."""
    return {"start": [{"mentioned_in": text}], "limit": 50}


def _strong(name: str, question: str) -> bool:
    """Whether ``question`` names ``name`` as a name: more than one word, a digit, or a capital letter
    where the question writes it (not "actors", "fall", "together": the graph's tags and titles that
    are also common words)."""
    if len(name.split()) > 1 or any(ch.isdigit() for ch in name):
        return True
    at = question.casefold().find(name.casefold())
    written = question[at : at + len(name)] if at >= 0 else name
    return any(ch.isupper() for ch in written)


def mentions(result: Any, question: str | None = None) -> list[Mention]:
    """The named entities of a look-up's result, one per (name, type), the longest names first.

    With ``question``, a lower-case single word ("actors", "fall") is left out when the question
    names something else that is clearly a name (measured on MetaQA: offered, the model made such
    words a second entity to intersect with, and the answer was empty)."""
    if not isinstance(result, dict):
        return []
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entity in result.get("results") or []:
        if isinstance(entity, dict) and isinstance(entity.get("name"), str):
            grouped.setdefault((entity["name"], str(entity.get("type") or "")), []).append(entity)
    found = []
    for (name, type_), entities in grouped.items():
        numbers = sorted(
            {
                k
                for e in entities
                for k, v in (e.get("properties") or {}).items()
                if isinstance(v, int | float) and not isinstance(v, bool) and not k.casefold().endswith("id")
            }
        )
        found.append(Mention(name, type_, tuple(str(e["key"]) for e in entities), tuple(numbers)))
    found.sort(key=lambda m: -len(m.name))
    if question is not None and any(_strong(m.name, question) for m in found):
        found = [m for m in found if _strong(m.name, question)]
    return found[:PLAN_MAX_STARTS]

"""The small-model loop's own look-ups: the entity a search found by name, and the entities it points to.

Measured with ``make eval`` on Qwen2.5-Coder-1.5B: the model picks a good first search under a JSON
schema, but never chains a second call itself (two-hop questions were answered with the city's
country, never its capital), and made to call again it copied its first search. So after a search,
the loop (not the model) looks up, with the agent's own edges tool and without a model step:

1. the **named hits**: the results whose name the search query contains as whole words (the
   longest first, at most ``MAX_NAMED``). A search always returns its nearest matches; a hit that is
   not named in the query is not what the user asked about;
2. the **functional neighbours** of each named hit: the targets of its outgoing relationship types
   that have exactly one target (a city's country, a country's currency), at most
   ``MAX_NEIGHBOURS`` a turn — the second hop of "the capital of the country in which C lies".

Each look-up is an ordinary tool call, run by ADK and stored in ``kb.agent_run_tool_calls`` like
the model's; the answer step then reads them as **entity cards** (``entity_card``): the entity, then
one line per relationship type and direction with the number of entities and their links (``cards``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from apps.agents.llm.base import ChatMessage, ToolSpec

MAX_NAMED = 2
MAX_NEIGHBOURS = 3
EDGES_LIMIT = 500
# Members listed per relationship line; the rest are counted ("and 35 more").
GROUP_SHOWN = 12
# A neighbour's card leaves out relationship types with more entities than this (a country's cities).
NEIGHBOUR_GROUP_MAX = 10
DESCRIPTION_MAX = 240


def words(text: str) -> str:
    """``text`` folded for whole-word comparison: case and accents dropped, punctuation as spaces."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(ch if ch.isalnum() else " " for ch in folded if not unicodedata.combining(ch))
    return f" {' '.join(plain.split())} "


def is_entity(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(value.get(k), str) for k in ("key", "name"))


def is_passage(value: Any) -> bool:
    """A passage of a document as ``search_passages`` returns it (the citation filter's shape)."""
    return isinstance(value, dict) and all(
        isinstance(value.get(k), str) for k in ("id", "document_id", "document_name", "text")
    )


def entities(value: Any) -> list[dict[str, Any]]:
    """Every entity object (``key`` and ``name``) in a tool result, in order."""
    if is_entity(value):
        return [value]
    if isinstance(value, dict):
        return [e for v in value.values() for e in entities(v)]
    if isinstance(value, list):
        return [e for v in value for e in entities(v)]
    return []


def link(entity: dict[str, Any]) -> str:
    return f"[{entity['name']}](entity:{entity['key']})"


def named_hits(hits: Sequence[dict[str, Any]], query: str) -> list[dict[str, Any]]:
    """The hits whose whole name stands in ``query`` as whole words, longest name first.

    A name inside a longer chosen one ("Sudan" in "South Sudan") is left out, and so are repeats.
    """
    query_words = words(query)
    named = [e for e in hits if words(str(e["name"])).strip() and words(str(e["name"])) in query_words]
    named.sort(key=lambda e: -len(words(str(e["name"]))))
    chosen: list[dict[str, Any]] = []
    for hit in named:
        name = words(str(hit["name"]))
        if any(name in words(str(c["name"])) for c in chosen) or hit["key"] in {c["key"] for c in chosen}:
            continue
        chosen.append(hit)
    return chosen[:MAX_NAMED]


def edges_tool(tools: Sequence[ToolSpec]) -> str | None:
    """The offered tool that lists one entity's relationships: it needs only ``entity_id`` and takes a direction."""
    for tool in tools:
        required = set(tool.parameters.get("required") or [])
        if required == {"entity_id"} and "direction" in (tool.parameters.get("properties") or {}):
            return tool.name
    return None


def json_of(content: str) -> Any:
    try:
        return json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return None


def _is_card(data: Any) -> bool:
    return isinstance(data, dict) and is_entity(data.get("entity")) and isinstance(data.get("edges"), list)


def is_card(content: str) -> bool:
    return _is_card(json_of(content))


@dataclass
class TurnLookups:
    """What this turn's tool calls found: the searches' named hits and the cards fetched so far."""

    named: list[dict[str, Any]]
    cards: dict[str, dict[str, Any]]  # entity key -> the edges tool's result
    looked_up: set[str]  # entity refs the edges tool was called for
    searched: bool
    threshold: int | None = None  # the number the question compares with (``question_number``)

    def neighbour_of(self, key: str) -> tuple[dict[str, Any], str] | None:
        """The named hit whose functional neighbour ``key`` is, and the relationship type, if any."""
        if key in {hit["key"] for hit in self.named}:
            return None
        for hit in self.named:
            card = self.cards.get(hit["key"])
            for rel, other in functional_neighbours(card) if card is not None else []:
                if other["key"] == key:
                    return hit, rel
        return None


def _mentioned_text(arguments: dict[str, Any]) -> str | None:
    """The text of a path query that only looks up the names a text mentions (no hops), else None."""
    starts = arguments.get("start")
    if arguments.get("hops") or not isinstance(starts, list) or len(starts) != 1:
        return None
    text = starts[0].get("mentioned_in") if isinstance(starts[0], dict) else None
    return text if isinstance(text, str) else None


def turn_lookups(turn: Sequence[ChatMessage], edges: str | None) -> TurnLookups:
    """Read this turn's calls and results (the messages after the user's)."""
    calls = {c.id: c for m in turn if m.role == "assistant" for c in m.tool_calls}
    found = TurnLookups(named=[], cards={}, looked_up=set(), searched=False)
    for request in calls.values():
        if request.name == edges and isinstance(request.arguments.get("entity_id"), str):
            found.looked_up.add(request.arguments["entity_id"])
    for message in turn:
        call = calls.get(message.tool_call_id or "") if message.role == "tool" else None
        data = json_of(message.content) if call is not None else None
        if call is None or data is None:
            continue
        query = call.arguments.get("query")
        if query is None:
            # The planned loop's look-up of the names a question mentions reads like a search of it.
            query = _mentioned_text(call.arguments)
        if isinstance(query, str):
            found.searched = True
            for hit in named_hits(entities(data), query):
                if hit["key"] not in {n["key"] for n in found.named}:
                    found.named.append(hit)
        elif _is_card(data):
            found.cards[data["entity"]["key"]] = data
    found.named = found.named[:MAX_NAMED]
    return found


def functional_neighbours(card: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(type, target) of the entity's outgoing relationship types that have exactly one target."""
    targets: dict[str, list[dict[str, Any]]] = {}
    for edge in card["edges"]:
        if edge.get("direction") == "out" and is_entity(edge.get("other")):
            targets.setdefault(str(edge.get("type")), []).append(edge["other"])
    return [(rel, others[0]) for rel, others in sorted(targets.items()) if len(others) == 1]


def next_lookup(
    turn: Sequence[ChatMessage], tools: Sequence[ToolSpec], found: TurnLookups | None = None
) -> dict[str, Any] | None:
    """The arguments of the edges call the loop makes next this turn, or ``None`` when it is done.

    ``found``: this turn's ``turn_lookups`` when the caller read them already.
    """
    edges = edges_tool(tools)
    if edges is None:
        return None
    found = found if found is not None else turn_lookups(turn, edges)
    for hit in found.named:
        if hit["key"] not in found.looked_up:
            return {"entity_id": hit["key"], "limit": EDGES_LIMIT}
    neighbours = [
        n
        for hit in found.named
        if (card := found.cards.get(hit["key"])) is not None
        for _, n in functional_neighbours(card)
    ]
    named_keys = {hit["key"] for hit in found.named}
    wanted = [n for n in neighbours if n["key"] not in named_keys][:MAX_NEIGHBOURS]
    for neighbour in wanted:
        if neighbour["key"] not in found.looked_up:
            return {"entity_id": neighbour["key"], "limit": EDGES_LIMIT}
    return None


# --- the documents' passages, when the graph does not answer ---

# The loop's passage search is the question itself (``search_passages`` takes up to 1,000 characters).
PASSAGE_QUERY_MAX = 500


def passages_tool(tools: Sequence[ToolSpec]) -> str | None:
    """The offered tool that searches the passages of the project's documents: it needs only ``query``
    and takes a ``document_id``. Offered only in a project with documents (``search_passages``'s
    ``available``), so without documents nothing below changes a step."""
    for tool in tools:
        required = set(tool.parameters.get("required") or [])
        if required == {"query"} and "document_id" in (tool.parameters.get("properties") or {}):
            return tool.name
    return None


def passage_search(
    turn: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    question: str,
    found: TurnLookups,
    *,
    plan_found_nothing: bool = False,
) -> dict[str, Any] | None:
    """The arguments of the passage search the loop makes itself this turn, or ``None``.

    When the graph did not answer (the plan's path queries found nothing, or a search ran and named
    no entity) and the passages of documents could, the loop searches them with the question, as
    plain RAG does, once a turn and only if nobody searched them yet this turn. ``found``: this
    turn's ``turn_lookups``.
    """
    tool = passages_tool(tools)
    if tool is None or not question.strip():
        return None
    if any(c.name == tool for m in turn if m.role == "assistant" for c in m.tool_calls):
        return None
    unanswered = plan_found_nothing or (found.searched and not found.named and not found.cards)
    return {"query": question.strip()[:PASSAGE_QUERY_MAX]} if unanswered else None


# Words too common to tell which passage an answer drew on.
COMMON_WORDS = frozenset(
    "about after also been being from have into more most than that their them then there these "
    "they this those were what when where which while with would could should found document "
    "documents passage passages graph knowledge".split()
)
MAX_SOURCES = 2
# How an answer says it found nothing (the rules ask for "could not find it in the knowledge graph").
NOT_FOUND_PHRASES = ("could not find", "couldn't find", "not found", "no information")
_LINK_TARGET = re.compile(r"\]\((?:entity|passage):[^()\s]*\)")


def turn_passages(turn: Sequence[ChatMessage], tool: str | None) -> list[dict[str, Any]]:
    """The passages the passage search ``tool`` returned this turn, in order, each once."""
    calls = {c.id: c.name for m in turn if m.role == "assistant" for c in m.tool_calls}
    found: dict[str, dict[str, Any]] = {}
    for message in turn:
        if tool is None or message.role != "tool" or calls.get(message.tool_call_id or "") != tool:
            continue
        data = json_of(message.content)
        results = data.get("results") if isinstance(data, dict) else None
        for item in results if isinstance(results, list) else []:
            if is_passage(item):
                found.setdefault(item["id"], item)
    return list(found.values())


def _telling(text: str) -> set[str]:
    """The words of ``text`` that can tell passages apart: numbers, and words of 4 letters or more
    that are not common."""
    return {
        w
        for w in words(text).split()
        if any(c.isdigit() for c in w) or (len(w) >= 4 and w not in COMMON_WORDS)
    }


def passages_drawn_on(answer: str, question: str, passages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The passages an answer that cites none drew on: those sharing the most telling words with
    the answer that the question does not have (a search found every passage by the question's
    words), at most ``MAX_SOURCES``; none for an answer that found nothing.

    The 1.5B model cited in 1 answer of 50 however it was asked (``AnswerLinker``); the passages it
    answers from are the loop's, so the loop cites them, and the citation filter checks them."""
    if not passages or "(passage:" in answer or any(p in answer.casefold() for p in NOT_FOUND_PHRASES):
        return []
    # A link's target is not a word of the answer ("[France](entity:country:FR)" reads "France").
    new = _telling(_LINK_TARGET.sub("]", answer)) - _telling(question)
    scored = [(len(new & _telling(str(p["text"]))), index) for index, p in enumerate(passages)]
    best = max((score for score, _ in scored), default=0)
    if best == 0:
        return []
    return [passages[index] for score, index in scored if score == best][:MAX_SOURCES]


def sources_line(passages: Sequence[dict[str, Any]]) -> str:
    """The line the loop adds after an answer for the passages it drew on: "Source: [doc](passage:<id>)"."""
    if not passages:
        return ""
    links = ", ".join(f"[{p['document_name']}](passage:{p['id']})" for p in passages)
    return f"\n\n{'Source' if len(passages) == 1 else 'Sources'}: {links}"

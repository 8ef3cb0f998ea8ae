"""A planned turn's moves (look up the names, plan, answer) and the cards the answer step reads.

See ``plan_graph`` for how a turn is planned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.agents.llm.base import ChatMessage, ToolSpec
from apps.agents.loop.cards import members_line, question_number
from apps.agents.loop.plan import plan_request
from apps.agents.loop.plan_graph import (
    CARD_SHOWN,
    Mention,
    Relationship,
    graph_relationships,
    mention_lookup,
    mentions,
    path_tool,
)
from apps.agents.loop.word_relationships import word_hints
from apps.core.numbers import NUMBER_WORDS

# --- the turn so far -----------------------------------------------------------------------------


def is_mention_lookup(arguments: dict[str, Any]) -> bool:
    """Whether a path-tool call is the loop's look-up of the names a text mentions."""
    starts = arguments.get("start")
    return (
        isinstance(starts, list)
        and len(starts) == 1
        and isinstance(starts[0], dict)
        and "mentioned_in" in starts[0]
        and not arguments.get("hops")
    )


@dataclass
class PlanState:
    """This turn's path look-ups: the named entities, the plan's queries and results, the fallback card."""

    lookups: int = 0
    named: list[Mention] = field(default_factory=list)
    # The plan's queries (the typed paths that fit it best, in rank order) and their results.
    queries: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    other_calls: int = 0  # calls of other tools the model made (the loop's earlier recipe is running)

    def chosen(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The query the answer reads: the first that found something (a "yes" for yes/no), else the first."""
        for arguments, result in self.queries:
            if (
                result.get("exists")
                or (result.get("results") and "exists" not in result)
                or result.get("groups")
            ):
                return arguments, result
        return self.queries[0] if self.queries else None


def plan_state(
    turn: Sequence[ChatMessage], tool_name: str, edges_name: str | None, lookup_prefix: str
) -> PlanState:
    """Read this turn's calls: the loop's look-ups of names, the plan's queries, the start's edges."""
    state = PlanState()
    calls = {c.id: c for m in turn if m.role == "assistant" for c in m.tool_calls}
    for message in turn:
        call = calls.get(message.tool_call_id or "") if message.role == "tool" else None
        if call is None:
            continue
        try:
            data = json.loads(message.content)
        except (json.JSONDecodeError, TypeError):
            data = None
        if call.name == tool_name and is_mention_lookup(call.arguments):
            state.lookups += 1
            state.named = state.named or mentions(data, call.arguments["start"][0]["mentioned_in"])
        elif call.name == tool_name:
            state.queries.append(
                (call.arguments, data if isinstance(data, dict) else {"error": message.content})
            )
        elif not call.id.startswith(lookup_prefix):
            state.other_calls += 1
    return state


def found_nothing(arguments: dict[str, Any], result: dict[str, Any]) -> bool:
    """Whether a path query's result holds nothing to answer from (a "no" to a yes/no is an answer):
    an error, no entity, or, for a query along no relationship that ranks nothing, only its start.

    Measured (MetaQA 1-hop, seed 44): plans with no relationship answered "describe the movie Noi
    the Albino in a few words" with an invented plot from the card "Noi the Albino: Noi the Albino",
    and "is The Lookout considered good" with "Yes: The Lookout" (it exists); the start's own facts
    (the earlier recipe's look-ups) hold its tags and its rating."""
    if "error" in result:
        return True
    if not result.get("results"):
        return "exists" not in result and not result.get("groups")
    return not arguments.get("hops") and arguments.get("result", "entities") in (
        "entities",
        "count",
        "exists",
    )


# --- the loop's next move ------------------------------------------------------------------------


@dataclass(frozen=True)
class LookUp:
    """A call the loop makes itself (no model step)."""

    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class MakePlan:
    """The forced plan step: the model chooses the answer's shape (``shape_schema``), then writes the
    plan for it (``plan_schema``); ``request`` is the user message of both."""

    request: str
    named: list[Mention]
    relationships: list[Relationship]
    hinted: list[str] = field(default_factory=list)  # relationships the question's words name
    question: str = ""  # its grammar decides the shapes allowed (``grammar.grammar_shapes``)


@dataclass(frozen=True)
class Answer:
    """The answer step: the model reads ``card``; ``appended`` is the full list the loop adds."""

    card: str
    entities: list[dict[str, Any]]
    appended: list[dict[str, Any]]
    # A result the loop writes out itself, with no model step (``group_answer``).
    written: str = ""
    # The result entities the answer must name (``unnamed_results``): a short list's, else none.
    found: list[dict[str, Any]] = field(default_factory=list)
    # A count's number, which the answer must state (``count_missing``); None for other shapes.
    count: int | None = None


Move = LookUp | MakePlan | Answer


def next_move(
    turn: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    *,
    question: str,
    earlier: str | None,
    edges_name: str | None,
    lookup_prefix: str,
) -> Move | None:
    """What the loop does next this turn along a path plan; None: the loop's earlier recipe (search,
    then the named entities' look-ups) goes on instead (nothing named, no relationships, a plan the
    model could not write or that found nothing, or that recipe already running)."""
    tool = path_tool(tools)
    if tool is None:
        return None
    state = plan_state(turn, tool.name, edges_name, lookup_prefix)
    if state.other_calls:
        return None
    if state.lookups == 0:
        return LookUp(tool.name, mention_lookup(question))
    if not state.named:
        if earlier and state.lookups == 1:
            return LookUp(tool.name, mention_lookup(earlier))
        return None
    relationships = graph_relationships(tool)
    if not relationships:
        return None
    chosen = state.chosen()
    if chosen is None:
        return MakePlan(
            plan_request(question, state.named, earlier if state.lookups > 1 else None, relationships),
            state.named,
            relationships,
            word_hints(question, relationships)[1],
            question,
        )
    arguments, result = chosen
    if found_nothing(arguments, result):
        # Measured ("the capital of the country in which the city Kumasi lies": CAPITAL_OF from the
        # city found nothing): the earlier recipe's look-ups of the named entities and their single
        # neighbours answer it from cards, as they did before plans.
        return None
    card = plan_card(arguments, result, threshold=question_number(question))
    entities = card_entities(result)
    return Answer(
        card=card,
        entities=[e for e in entities if isinstance(e, dict)],
        appended=full_list(result),
        written=group_answer(arguments, result) or ranked_answer(arguments, result),
        found=answer_must_name(arguments, result),
        count=int(result.get("count") or 0) if arguments.get("result") == "count" else None,
    )


# --- what the answer step reads --------------------------------------------------------------------


def _link(entity: dict[str, Any]) -> str:
    return f"[{entity['name']}](entity:{entity['key']})"


def _path_words(arguments: dict[str, Any], result: dict[str, Any]) -> str:
    starts = ", ".join(_link(s) for s in result.get("start") or []) or "the start"
    steps = []
    for hop in arguments.get("hops") or []:
        rel, direction = hop["relationship"], hop.get("direction")
        arrow = f"-{rel}->" if direction == "out" else f"<-{rel}-" if direction == "in" else f"-{rel}-"
        steps.append(f"{arrow} {hop.get('type') or '?'}")
    return " ".join([starts, *steps])


def _witness(path: list[dict[str, Any]]) -> str:
    """A result's path as text: "[Ghana](…) -BORDERS-> [Togo](…)"."""
    parts = []
    for step in path:
        if "relationship" in step:
            rel = step["relationship"]
            parts.append(f"-{rel}->" if step.get("direction") == "out" else f"<-{rel}-")
        parts.append(_link(step["entity"]))
    return " ".join(parts)


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int | float) and not isinstance(value, bool) else str(value)


def plan_card(arguments: dict[str, Any], result: dict[str, Any], threshold: int | None = None) -> str:
    """The plan's result as the answer step reads it: the path, then what it reached.

    With ``threshold`` (the one number the question names) a list whose entities share a number
    (a city's population) shows each one's value and whether it is more or less, largest first, as
    the earlier entity cards did."""
    if "error" in result:
        return f"The path query failed: {result['error']}"
    head = _path_words(arguments, result)
    also = [h["in_path"] for h in arguments.get("hops") or [] if h.get("in_path")]
    if also:
        head += " (only those also reached from the second entity named)"
    found = result.get("results") or []
    count = int(result.get("count") or 0)
    if "exists" in result:
        if result["exists"]:
            return "Yes: " + _witness(found[0].get("path") or []) if found else "Yes."
        # Measured: given the path here, the model copied its arrows as the answer.
        return "No: the graph does not link them that way."
    if "groups" in result:
        lines = [f"{head}, for each:"]
        for group in result["groups"][:CARD_SHOWN]:
            lines.append(f"- {_link(group['entity'])}: {', '.join(_link(m) for m in group['members'])}")
        if len(result["groups"]) > CARD_SHOWN:
            lines.append(f"- and {len(result['groups']) - CARD_SHOWN} more")
        return "\n".join(lines)
    if "max" in result or "min" in result:
        prop, order = _ranking(arguments, result)
        listed = "; ".join(
            f"{_link(e)}: {prop} {_number(e.get('properties', {}).get(prop))}" for e in found[:CARD_SHOWN]
        )
        return f"By {prop}, {order} first: {listed}." if listed else f"None of them has a {prop}."
    if not found:
        return "Nothing in the graph fits the question."
    if threshold is not None:
        return f"{head}: {count} found: {members_line(found, shown=CARD_SHOWN, threshold=threshold)}."
    shown = ", ".join(_link(e) for e in found[:CARD_SHOWN])
    more = f" and {count - CARD_SHOWN} more" if count > CARD_SHOWN else ""
    # Measured (MetaQA 1-hop, seed 44): from "-HAS_IMDB_RATING-> Rating: 1 found: good" the model
    # answered "the rating is 1" and "with 1 found: famous". The card names what it reached right
    # after the type and counts it last; and not at all for one entity of a list, whose "(1 in
    # all)" the model copied ("uses the CFA Franc BCEAO (1 in all)", "very popular, with 1 in all
    # votes": 8 answers of 217). "How many" is shaped a count, which keeps it.
    if count == 1 and arguments.get("result") != "count":
        return f"{head}: {shown}."
    return f"{head}: {shown}{more} ({count} in all)."


# Groups a per-item answer lists (each with all its members); beyond them, how many more there are.
ANSWER_GROUPS = 50


def group_answer(arguments: dict[str, Any], result: dict[str, Any]) -> str:
    """A per-item result written out by the loop: a line saying what was followed, then each item
    with its values ("- [Togo](…): [CFA Franc](…)"); "" for every other shape.

    Measured: given the same lines as a card, the model named the neighbours and then the start's
    own currency ("Which countries border Pakistan, and what currency does each use?"), or dropped
    items; the lines themselves are the answer, so no model step rewrites them."""
    groups = result.get("groups")
    hops = arguments.get("hops") or []
    if not groups or len(hops) < 2:
        return ""
    starts = ", ".join(_link(s) for s in result.get("start") or []) or "the start"
    along = ", then ".join(str(h["relationship"]) for h in hops[:-1])
    last = hops[-1]
    lines = [
        f"From {starts} along {along}, each {hops[-2].get('type') or 'item'} "
        f"with its {last.get('type') or 'values'} ({last['relationship']}):"
    ]
    for group in groups[:ANSWER_GROUPS]:
        lines.append(f"- {_link(group['entity'])}: {', '.join(_link(m) for m in group['members'])}")
    if len(groups) > ANSWER_GROUPS:
        lines.append(f"- and {len(groups) - ANSWER_GROUPS} more")
    return "\n".join(lines)


def ranked_answer(arguments: dict[str, Any], result: dict[str, Any]) -> str:
    """A comparison's result written out by the loop: the first by the number, then the others with
    theirs ("[South Korea](…) is the largest by area_km2 (98,480), then [Georgia](…) (69,700)."); ""
    for every other shape or when no entity has the number.

    Measured: from the card "By area_km2, largest first: [South Korea](…): area_km2 98,480;
    [Georgia](…): area_km2 69,700." the model answered "Georgia is larger than South Korea"."""
    if "max" not in result and "min" not in result:
        return ""
    prop, order = _ranking(arguments, result)
    ranked = [e for e in result.get("results") or [] if _has_number(e, prop)]
    if not ranked or not prop:
        return ""
    first, *rest = ranked[:CARD_SHOWN]
    text = f"{_link(first)} is the {order} by {prop} ({_number(first['properties'][prop])})"
    if rest:
        text += ", then " + ", ".join(f"{_link(e)} ({_number(e['properties'][prop])})" for e in rest)
    return text + "."


def _ranking(arguments: dict[str, Any], result: dict[str, Any]) -> tuple[str, str]:
    """A min/max result's property and order ("largest" or "smallest"), for the card and the answer."""
    ranking = result.get("max") or result.get("min") or {}
    prop = str(ranking.get("property") or arguments.get("property") or "")
    return prop, "largest" if "max" in result else "smallest"


def _has_number(entity: dict[str, Any], prop: str) -> bool:
    value = (entity.get("properties") or {}).get(prop)
    return isinstance(value, int | float) and not isinstance(value, bool)


def full_list(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The result entities the loop adds after the answer when the card could not show them all."""
    found = result.get("results") or []
    if "groups" in result or "exists" in result or "max" in result or "min" in result:
        return []
    return found if int(result.get("count") or 0) > CARD_SHOWN else []


def answer_must_name(arguments: dict[str, Any], result: dict[str, Any]) -> list[dict[str, Any]]:
    """The entities a list's answer must name: a short list's results (a long one is added
    whole after the answer anyway); none for the other shapes."""
    if arguments.get("result", "entities") != "entities" or full_list(result):
        return []
    return [e for e in result.get("results") or [] if isinstance(e, dict) and "key" in e and "name" in e]


def unnamed_results(answer: str, found: Sequence[dict[str, Any]]) -> str:
    """What the loop adds after an answer that leaves out results it was given: all of them when it
    names none, the rest when it names some; "" when it names them all (or there are none).

    Measured on MetaQA: the model answered "what topics is Tanner Hall about" with
    "Tanner Hall is about a movie" from a card that showed the tag "bd-r", answered with its own
    plan ("To answer this question, I'll follow these steps"), and named one genre of two or one
    actor of four (recall 0.79 at 1-hop with Hits@1 0.90)."""
    text = answer.casefold()
    left = [e for e in found if str(e["name"]).casefold() not in text]
    if not left:
        return ""
    lead = "Found in the graph" if len(left) == len(found) else "Also found"
    return f"\n\n{lead}: " + ", ".join(_link(e) for e in left) + "."


_ENTITY_LINK = re.compile(r"\[([^\[\]\n]+)\]\(entity:[^()\s]+\)")


def unlinked(text: str) -> str:
    """``text`` with its entity links as plain names: an earlier message, and a planned answer's card.

    Measured: a follow-up's answer copied the previous answer's links, which this turn's tools did
    not return (so they count as uncited); the answer linker links the names the answer writes from
    this turn's cards."""
    return _ENTITY_LINK.sub(lambda m: m.group(1), text)


def count_missing(answer: str, count: int | None) -> str:
    """What the loop adds after a count's answer that does not state the count (in digits, or as a
    word up to twenty, outside its links): "In all: 3."; "" when it does, or for another shape.

    Measured: "In how many countries is the Norwegian Krone the currency?", planned as a count and
    shown "… Country: Norway, Svalbard and Jan Mayen, Bouvet Island (3 in all).", was answered "The
    Norwegian Krone is the currency in Norway, Svalbard and Jan Mayen." with no number (2 of 8
    such questions); "How many countries use the Quamiori?" was answered "There are 2 countries"."""
    if count is None:
        return ""
    words = re.findall(r"\d[\d,]*|[a-z]+", unlinked(answer).casefold())
    said = {w.replace(",", "") for w in words if w[0].isdigit()} | {
        str(NUMBER_WORDS[w]) for w in words if w in NUMBER_WORDS
    }
    return "" if str(count) in said else f"\n\nIn all: {count:,}."


def card_entities(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every entity a plan's result shows (for the answer's links)."""
    out = list(result.get("start") or [])
    for item in result.get("results") or []:
        out.append(item)
        out += [step["entity"] for step in item.get("path") or []]
    for group in result.get("groups") or []:
        out += [group["entity"], *group["members"]]
    return [e for e in out if isinstance(e, dict) and "key" in e and "name" in e]

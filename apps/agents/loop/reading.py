"""Answering from the passages of documents, hop by hop (issue #48).

When the graph holds no relationship to plan a path over, or its plan or search found nothing,
the small-model loop reads the project's documents itself:

1. **Search** each thing the question asks about with ``search_passages``: the question itself,
   or for a comparison each named thing's own question (``comparisons.comparison``), all in one step.
   A search's query is the question as far as it is resolved, so the turn's calls are its state:
   a loop that resumes in another process reads the same state from the stored calls.
2. **Resolve a hop**: when the question still holds a nested description ("the director of film
   X"), the model reads the search's passages for it alone, under a JSON Schema (the passage that
   answers, and the answer as written there). The name it gives replaces the description, and the
   next search asks the resolved question ("Who is the child of Vatroslav Mimica?"): the second
   search with the bridge, as the graph loop chains a path's hops. At most ``MAX_SEARCHES`` a thing.
3. **Answer**: with nothing left to resolve, the model reads the question against the last
   search's passages; a comparison's two answers are compared by rule where they are dates or
   places (``compared.decided``), and by the model choosing one of the two otherwise.

The answer names what each hop found and cites the passage it came from
(``[document](passage:<id>)``); an answer that no passage shown holds is not given, and the turn
says it found nothing. The model reads only passages and writes only short JSON: the loop makes
the searches, the substitutions and the comparisons.
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from apps.agents.llm.base import (
    ChatMessage,
    Done,
    ErrorEvent,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from apps.agents.loop.answer_forms import asks_country, headline, nationality_over_descent, with_alias
from apps.agents.loop.compared import decided
from apps.agents.loop.comparisons import Comparison, comparison
from apps.agents.loop.countries import country_of
from apps.agents.loop.follow_up import standalone_question
from apps.agents.loop.full_names import full_name
from apps.agents.loop.kinship import kin_checked
from apps.agents.loop.lookups import PASSAGE_QUERY_MAX, is_passage, passages_tool
from apps.agents.loop.passage_text import (
    DATELESS,
    Reading,
    bare_date,
    bridge_name,
    focus,
    holds,
    plain,
    reading_of,
)
from apps.agents.loop.prompt import LOOKUP_ID_PREFIX, this_turn_start
from apps.agents.loop.questions import answer_kind, as_plain_relations, nested_description, resolved
from apps.graph_tools.recognizer import mentions_find, normalise

# The ids of the loop's reading searches: "lookup_read<thing>_<hex>" (the thing: 0, or 0/1 compared).
READ_PREFIX = f"{LOOKUP_ID_PREFIX}read"
_READ_ID = re.compile(rf"^{READ_PREFIX}(\d)_")
# Searches of one thing in a turn: the question and up to two resolved hops.
MAX_SEARCHES = 3
# Passages the model reads in one step, and how much of each.
READ_PASSAGES = 4
READ_TEXT_MAX = 800
READ_MAX_TOKENS = 60
CHOOSE_MAX_TOKENS = 30
ANSWER_MAX_CHARS = 100
NOT_FOUND = "I could not find it in the knowledge graph or in the documents."

READ_SYSTEM = (
    "You read passages of documents to answer a question. Use only what the passages say, never "
    "your own knowledge. Write the number of the passage that answers the question, and the answer "
    "exactly as that passage writes it: a name, a place, a date or a number, a few words at most. "
    "If no passage answers it, write passage 0 and an empty answer."
)
CHOOSE_SYSTEM = "You answer a question from the facts given, choosing one of the options."


@dataclass(frozen=True)
class Search:
    """One of the loop's reading searches: the thing it is about, its query, the passages it found."""

    thing: int
    query: str
    passages: list[dict[str, Any]]


# The model's reading of ``question`` in ``passages``, told the answer is not ``excluded`` when it is
# not "" (None: the model failed; the turn ends).
Reader = Callable[[str, list[dict[str, Any]], str], Awaitable[Reading | None]]
# The model's choice among ``options`` for ``prompt`` (None: the model failed).
Chooser = Callable[[str, list[str]], Awaitable[str | None]]


def is_reading(turn: Sequence[ChatMessage], tool: str | None) -> bool:
    """Whether the loop has started reading the documents this turn."""
    return tool is not None and bool(reading_searches(turn, tool))


def reading_searches(turn: Sequence[ChatMessage], tool: str) -> list[Search]:
    """The loop's reading searches this turn that have a result, in the order they were made."""
    calls = [
        c
        for m in turn
        if m.role == "assistant"
        for c in m.tool_calls
        if c.name == tool and _READ_ID.match(c.id)
    ]
    results = {m.tool_call_id: m.content for m in turn if m.role == "tool" and m.tool_call_id}
    searches = []
    for call in calls:
        if call.id not in results:
            continue
        data = _json(results[call.id])
        found = data.get("results") if isinstance(data, dict) else None
        passages = [p for p in found if is_passage(p)] if isinstance(found, list) else []
        thing = int(_READ_ID.match(call.id).group(1))  # type: ignore[union-attr]
        searches.append(Search(thing=thing, query=str(call.arguments.get("query", "")), passages=passages))
    return searches


def _json(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return None


def search_call(tool: str, thing: int, query: str) -> ToolCall:
    """The loop's reading search of ``query`` for thing ``thing``."""
    return ToolCall(
        id=f"{READ_PREFIX}{thing}_{uuid.uuid4().hex[:12]}",
        name=tool,
        arguments={"query": query.strip()[:PASSAGE_QUERY_MAX]},
    )


def first_searches(tool: str, question: str) -> list[ToolCall]:
    """The searches that start reading: the question, or each compared thing's own question."""
    compared = comparison(question)
    asks = list(compared.asks) if compared is not None else [question]
    return [search_call(tool, thing, as_plain_relations(ask)) for thing, ask in enumerate(asks)]


def about(question: str, passages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The passages worth reading for ``question``: those that name what it names (by the mention
    recognizer; a name written whole counts more than one of its longer words, as a surname
    alone), most first, in search order otherwise; all of them when none does.

    Where a passage names a name whole, only the passages of the documents that do are worth
    reading: another passage holding only its surname is a namesake's.

    Measured on the docqa dev sample: of five passages, the 1.5B model often answered from one
    about another film or person than the question's ("Where was Domenico Ravenna born?" answered
    from Pia Ravenna's); and a long article's later passage names its subject by surname only
    ("His son …" in Vatroslav Mimica's second passage)."""
    names = {plain(m.surface) for m in mentions_find(question) if m.kind != "date"} - {""}
    words = {w for n in names for w in n.split() if len(w) >= 4}

    texts = [f" {plain(str(p['text']))} " for p in passages]
    whole = [sum(f" {n} " in text for n in names) for text in texts]
    named = {str(p.get("document_id")) for p, w in zip(passages, whole, strict=True) if w}
    counted = [
        (2 * w + sum(f" {word} " in text for word in words), i)
        for i, (p, w, text) in enumerate(zip(passages, whole, texts, strict=True))
        # a namesake's passage ("Pia Ravenna" for "Domenico Ravenna") is not read
        if not named or str(p.get("document_id")) in named
    ]
    naming = sorted((c for c in counted if c[0] > 0), key=lambda c: (-c[0], c[1]))
    return [passages[i] for _, i in naming] if naming else list(passages)


def read_prompt(
    question: str, passages: Sequence[dict[str, Any]], not_a_date: bool = False, excluded: str = ""
) -> list[ChatMessage]:
    """What the model reads: the numbered passages, then the question and the kind of answer it
    asks for (``questions.answer_kind``), "not a date" when asked again after answering one, and
    "not <excluded>" when asked again after answering with what the question itself names."""
    texts = [focus(str(p["text"]), question, READ_TEXT_MAX) for p in passages]
    lines = [f"[{n}] {text}" for n, text in enumerate(texts, start=1)]
    kind = answer_kind(question)
    nots = [n for n in ("a date" if not_a_date else "", excluded) if n]
    said = ", ".join(([kind] if kind else []) + [f"not {n}" for n in nots])
    asks = f" (the answer is {said})" if said else ""
    body = (
        "Passages:\n"
        + "\n".join(lines)
        + f"\n\nQuestion: {question}{asks}\nThe passage that answers it, and the answer:"
    )
    return [ChatMessage(role="system", content=READ_SYSTEM), ChatMessage(role="user", content=body)]


def read_schema(count: int) -> dict[str, Any]:
    """The reading step's JSON Schema: a passage number (0: none) and a short answer."""
    return {
        "type": "object",
        "properties": {
            "passage": {"type": "integer", "enum": list(range(count + 1))},
            "answer": {"type": "string", "maxLength": ANSWER_MAX_CHARS},
        },
        "required": ["passage", "answer"],
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class Hop:
    """A resolved hop: the description, the name a passage gave for it, and that passage."""

    description: str
    name: str
    passage: dict[str, Any] | None


def _hops(searches: Sequence[Search]) -> list[Hop]:
    """The hops one thing's searches resolved: each query that follows a resolved description."""
    hops = []
    for before, after in itertools.pairwise(searches):
        nested = nested_description(before.query)
        tail = len(before.query) - nested.end if nested is not None else 0
        if nested is None or tail > len(after.query) - nested.start:
            continue
        name = after.query[nested.start : len(after.query) - tail]
        holding = [p for p in before.passages if holds(str(p["text"]), name)]
        shown = holding or before.passages
        hops.append(Hop(description=nested.text, name=name, passage=shown[0] if shown else None))
    return hops


def _cite(passage: dict[str, Any] | None) -> str:
    return f" [{passage['document_name']}](passage:{passage['id']})" if passage is not None else ""


@dataclass
class ReadStep:
    """What one step of reading does: more searches, or the answer's text (``searches`` empty)."""

    searches: list[ToolCall]
    text: str = ""


async def read_step(
    question: str, searches: Sequence[Search], tool: str, read: Reader, choose: Chooser
) -> ReadStep | None:
    """The next step of reading ``question`` after ``searches`` (None: the model failed)."""
    compared = comparison(question)
    things = 2 if compared is not None else 1
    by_thing = [[s for s in searches if s.thing == t] for t in range(things)]
    more: list[ToolCall] = []
    for thing, own in enumerate(by_thing):
        if not own:
            return ReadStep(searches=first_searches(tool, question))
        last = own[-1]
        nested = nested_description(last.query) if len(own) < MAX_SEARCHES else None
        if nested is None:
            continue
        shown = about(nested.text, last.passages)[:READ_PASSAGES]
        reading = await kin_checked(
            read, nested.sub_question(), shown, await read(nested.sub_question(), shown, "")
        )
        if reading is None:
            return None
        name = bridge_name(reading.answer, last.query, nested.head())
        if name:
            more.append(search_call(tool, thing, resolved(last.query, nested, name)))
    if more:
        return ReadStep(searches=more)
    finals: list[Reading] = []
    for own in by_thing:
        reading = await _final_reading(question, own[-1], compared is None, read)
        if reading is None:
            return None
        finals.append(reading)
    if compared is None:
        return ReadStep(searches=[], text=_answer(by_thing[0], finals[0]))
    return await _compared(question, compared, by_thing, finals, choose)


async def _final_reading(question: str, last: Search, alone: bool, read: Reader) -> Reading | None:
    """What the last search of one thing answers, read and checked (``alone``: not one side of a
    comparison, whose readings are compared as they are)."""
    shown = about(last.query, last.passages)[:READ_PASSAGES]
    reading = await read(last.query, shown, "")
    if reading is not None and reading.passage is not None and asks_country(last.query):
        said = nationality_over_descent(reading.answer, str(reading.passage["text"]))
        reading = Reading(said, reading.passage)
    if not alone or reading is None:
        return reading
    reading = await kin_checked(read, last.query, shown, reading)
    reading = full_name(last.query, reading, last.passages) if reading is not None else None
    asked = (question, last.query)
    if reading is not None and names_asked(reading.answer, asked):
        # "Who is Sibyl Hathaway's child-in-law?" answered "Dame Sibyl Hathaway": asked again.
        again = await read(last.query, shown, reading.answer)
        reading = again if again is None or not names_asked(again.answer, asked) else Reading("", None)
    if reading is not None and reading.passage is not None:
        reading = Reading(with_alias(reading.answer, str(reading.passage["text"])), reading.passage)
    return reading


def names_asked(answer: str, questions: Sequence[str]) -> bool:
    """Whether ``answer`` is a name one of ``questions`` (the question and its resolved form) names,
    or a part of one or one with a title ("Dame Sibyl Hathaway" for "Sibyl Hathaway's …"): not what
    it asks. A child named after a parent ("Leopoldo Torre Nilsson", "Leopoldo Torres Ríos") is not.
    Nor, unless a country is asked, the country it names in another form: measured, "Where is the
    district that Knott is part of located in the UK?" was answered "The United Kingdom"."""
    said = f" {normalise(answer)} "
    if not said.strip():
        return False
    country = country_of(answer)
    for question in questions:
        for mention in mentions_find(question):
            name = f" {normalise(mention.surface)} "
            if mention.kind != "date" and name.strip() and (name in said or said in name):
                return True
            if country is not None and not asks_country(question) and country_of(mention.surface) == country:
                return True
    return False


def _answer(own: Sequence[Search], final: Reading) -> str:
    """One thing's answer: the answer first, then each hop and the final reading with its passage."""
    if not final.answer:
        return NOT_FOUND
    lines = [f"- {h.description}: {h.name}{_cite(h.passage)}" for h in _hops(own)]
    lines.append(f"- {own[-1].query} {final.answer}{_cite(final.passage)}")
    return f"{headline(own[-1].query, final.answer)}.\n\n" + "\n".join(lines)


async def _compared(
    question: str,
    compared: Comparison,
    by_thing: Sequence[Sequence[Search]],
    finals: Sequence[Reading],
    choose: Chooser,
) -> ReadStep | None:
    """A comparison's answer: decided by rule from the two readings, or chosen by the model."""
    if not all(r.answer for r in finals):
        return ReadStep(searches=[], text=NOT_FOUND)
    values = (finals[0].answer, finals[1].answer)
    picked = decided(compared, values)
    if picked is None:
        options = ["yes", "no"] if compared.decision == "same" else list(compared.things)
        facts = "\n".join(f"- {t}: {v}" for t, v in zip(compared.things, values, strict=True))
        picked = await choose(f"Facts:\n{facts}\n\nQuestion: {question}\nAnswer:", options)
        if picked is None:
            return None
    lines = []
    for own, final in zip(by_thing, finals, strict=True):
        lines += [f"- {h.description}: {h.name}{_cite(h.passage)}" for h in _hops(own)]
        lines.append(f"- {own[-1].query} {final.answer}{_cite(final.passage)}")
    head = picked.capitalize() if picked in ("yes", "no") else picked
    return ReadStep(searches=[], text=f"{head}.\n\n" + "\n".join(lines))


def choose_schema(options: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": list(options)}},
        "required": ["answer"],
        "additionalProperties": False,
    }


# --- the provider's side: one step of a turn that reads ----------------------------------------------

# One request whose answer must follow a JSON Schema: (prompt, schema name, schema, max tokens) ->
# (its text, the provider's error or None); the loop's ``ModelRequests.constrained_by``.
Constrained = Callable[
    [list[ChatMessage], str, dict[str, Any], int], Awaitable[tuple[str, ErrorEvent | None]]
]


def reading_tool(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> str | None:
    """The passage search tool when this turn has started reading the documents, else None."""
    tool = passages_tool(tools) if tools else None
    start = this_turn_start(messages)
    if tool is None or start >= len(messages):
        return None
    return tool if is_reading(messages[start + 1 :], tool) else None


def _parsed(text: str) -> dict[str, Any]:
    data = _json(text)
    return data if isinstance(data, dict) else {}


async def reading_events(
    messages: Sequence[ChatMessage], tool: str, constrained: Constrained, usage: Usage
) -> AsyncIterator[StreamEvent]:
    """One step of reading (``read_step``) as provider events: the searches, or the answer."""
    start = this_turn_start(messages)
    failed: list[ErrorEvent] = []

    async def read(
        question: str, passages: list[dict[str, Any]], excluded: str = "", again: bool = False
    ) -> Reading | None:
        if not passages:
            return Reading(answer="", passage=None)
        prompt = read_prompt(question, passages, not_a_date=again, excluded=excluded)
        text, error = await constrained(prompt, "read", read_schema(len(passages)), READ_MAX_TOKENS)
        if error is not None:
            failed.append(error)
            return None
        written, kind = _parsed(text), answer_kind(question)
        if not again and kind in DATELESS and bare_date(str(written.get("answer") or "")):
            return await read(question, passages, excluded, again=True)  # asked a place, it answered a date
        return reading_of(written, passages, kind)

    async def choose(prompt: str, options: list[str]) -> str | None:
        asked = [ChatMessage(role="system", content=CHOOSE_SYSTEM), ChatMessage(role="user", content=prompt)]
        text, error = await constrained(asked, "choose", choose_schema(options), CHOOSE_MAX_TOKENS)
        if error is not None:
            failed.append(error)
            return None
        picked = _parsed(text).get("answer")
        return str(picked) if picked in options else options[0]

    searches = reading_searches(messages[start + 1 :], tool)
    step = await read_step(standalone_question(messages), searches, tool, read, choose)
    if step is None:
        yield failed[0] if failed else ErrorEvent(error="the model could not read the passages")
        return
    for call in step.searches:
        yield call
    if step.searches:
        yield Done(usage=usage, finish_reason="tool_calls")
        return
    yield TextDelta(text=step.text)
    yield Done(usage=usage, finish_reason="stop")

"""The plan step of a planned turn: its JSON Schemas, the question's hints, and the typed paths chosen.

See ``plan_graph`` for how a turn is planned. The model writes the answer's shape, then the plan for
that shape (a start among the named entities, the type asked for, the relationships the question
goes through, maybe a second named entity); ``plan_candidates`` turns it into ``query_paths`` calls.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apps.agents.loop.meaning import (
    GLUE,
    relationship_by_meaning,
    relationship_by_values,
    similarities,
    words_of,
)
from apps.agents.loop.plan_graph import (
    MAX_CANDIDATES,
    PLAN_MAX_HOPS,
    RESULT_SHAPES,
    SHAPES,
    Mention,
    PathOption,
    Relationship,
    typed_paths,
)

# --- the plan ----------------------------------------------------------------------------------

PLAN_RULES = """To look something up, first say the shape of the answer:
- "list": the entities asked for ("which countries border X", "who directed Y", "what is the capital of X");
- "count": how many;
- "yes/no": a question answered yes or no ("does A border B", "is X the capital of Y");
- "each": a list where every item gets its own answer ("which countries border X, and what currency does each use", "list the books with their authors", "for each neighbour, name its capital");
- "largest"/"smallest": which of two or more is bigger, larger, more populous / smaller ("which is larger, A or B").
Then the plan, for that shape:
- "start": the entity the question is about (one of the entities named; some named entities are only common words);
- "asks_for": the type of what is asked;
- "relationships": every relationship the question goes through, in the order it mentions them; one mentioned twice ("the films directed by the director of X": directed, director) is written twice; none when it asks about the start itself;
- "and": another named entity the answers must also be related to, with the relationships from it ("both A and B", "the ones that use X", "is A related to B"), else null;
- "property" (largest/smallest): the number compared, of the start and the "and" entity, or of the answers.
Examples from another graph (Book -WRITTEN_BY-> Person, Book -PUBLISHED_BY-> Publisher, Book -HAS_TOPIC-> Topic, Book -PUBLISHED_IN-> Year, Publisher -LOCATED_IN-> City):
- "who wrote Dune" (list): {"start": "Dune", "asks_for": "Person", "relationships": ["WRITTEN_BY"], "and": null}
- "which books did Ann Lee write" (list): {"start": "Ann Lee", "asks_for": "Book", "relationships": ["WRITTEN_BY"], "and": null}
- "Orbit Press is the publisher of which books?" (list): {"start": "Orbit Press", "asks_for": "Book", "relationships": ["PUBLISHED_BY"], "and": null}
- "which books have the same author as Dune" (list): {"start": "Dune", "asks_for": "Book", "relationships": ["WRITTEN_BY", "WRITTEN_BY"], "and": null}
- "who wrote books together with Ann Lee" (list): {"start": "Ann Lee", "asks_for": "Person", "relationships": ["WRITTEN_BY", "WRITTEN_BY"], "and": null}
- "when were the books by Ann Lee published" (list): {"start": "Ann Lee", "asks_for": "Year", "relationships": ["WRITTEN_BY", "PUBLISHED_IN"], "and": null}
- "what topics are the books of Ann Lee about" (list): {"start": "Ann Lee", "asks_for": "Topic", "relationships": ["HAS_TOPIC", "WRITTEN_BY"], "and": null}
- "the publishers of the books written by the author of Dune" (list): {"start": "Dune", "asks_for": "Publisher", "relationships": ["PUBLISHED_BY", "WRITTEN_BY", "WRITTEN_BY"], "and": null}
- "in which city is the publisher of Dune" (list): {"start": "Dune", "asks_for": "City", "relationships": ["LOCATED_IN", "PUBLISHED_BY"], "and": null}
- "the books that share a topic with Dune were published by whom" (list): {"start": "Dune", "asks_for": "Publisher", "relationships": ["HAS_TOPIC", "HAS_TOPIC", "PUBLISHED_BY"], "and": null}
- "how many books did Ann Lee write" (count): {"start": "Ann Lee", "asks_for": "Book", "relationships": ["WRITTEN_BY"], "and": null}
- "which books did both Ann Lee and Bo Chen write" (list): {"start": "Ann Lee", "asks_for": "Book", "relationships": ["WRITTEN_BY"], "and": {"start": "Bo Chen", "relationships": ["WRITTEN_BY"]}}
- "which of Ann Lee's books are about space" (list): {"start": "Ann Lee", "asks_for": "Book", "relationships": ["WRITTEN_BY"], "and": {"start": "space", "relationships": ["HAS_TOPIC"]}}
- "did Ann Lee write Dune?" (yes/no): {"start": "Ann Lee", "asks_for": "Book", "relationships": ["WRITTEN_BY"], "and": {"start": "Dune", "relationships": []}}
- "list Ann Lee's books with their publishers" (each): {"start": "Ann Lee", "asks_for": "Publisher", "relationships": ["WRITTEN_BY", "PUBLISHED_BY"], "and": null}
- "which books did Ann Lee write, and who published each?" (each): {"start": "Ann Lee", "asks_for": "Publisher", "relationships": ["WRITTEN_BY", "PUBLISHED_BY"], "and": null}
- "which book is longer, Dune or Emma?" (largest): {"start": "Dune", "asks_for": "Book", "relationships": [], "and": {"start": "Emma", "relationships": []}, "property": "pages"}
- "tell me about Dune" (list): {"start": "Dune", "asks_for": "Book", "relationships": [], "and": null}"""


# Words that open a question answered yes or no ("Does A border B?", "Is X the capital of Y?").
_AUXILIARIES = frozenset(
    {"is", "are", "was", "were", "do", "does", "did", "has", "have", "had", "can", "could", "will", "would"}
)
_QUESTION_WORDS = frozenset(
    {"which", "what", "who", "whom", "whose", "where", "when", "how", "why", "list", "name"}
)


def grammar_shapes(question: str, names: Sequence[str] = ()) -> tuple[str, ...]:
    """The answer shapes the question's grammar allows, read from its words outside ``names`` (the
    entities it names: "How Much Do You Love Me" is a film).

    - A question that opens with an auxiliary and asks no question word ("Is Polokwane the capital
      of South Africa?", "does A border B") is answered yes or no, and only such a question (or one
      that asks "whether") is: measured, the model chose "list" for "Is Polokwane the capital of
      South Africa" and "yes/no" for questions that ask which. "Can you …"/"Do you know …" ask for
      the thing itself, not yes or no.
    - One that offers a choice with "or" and a comparative asks which is first by a number, even
      after an auxiliary: measured, "Does Morogoro or Mixco have the larger population?" was
      answered yes or no ("No: the graph does not link them that way").
    - "How many" asks for a count (of each item's, with "each"): measured, "In how many countries
      is the Norwegian Krone the currency?" was shaped "list" in three questions of four, and
      answered with the countries and no number.
    - Only a question that asks something of each item (``_per_item_words``) is shaped "each":
      measured, the follow-up "What about its continent?" was shaped "each" and answered with the
      capital the turn before had named."""
    words = _words_outside(question, names)
    if "whether" in words:
        return ("yes/no",)
    if "or" in words and (compared := _comparative(words)):
        return (compared,)
    asks = any(w in _QUESTION_WORDS for w in words)
    polite = len(words) > 1 and words[1] == "you"
    if words and words[0] in _AUXILIARIES and not asks and not polite:
        return ("yes/no",)
    if ("how", "many") in itertools.pairwise(words):
        return ("count", "each") if "each" in words or "every" in words else ("count",)
    if _per_item_words(words):
        return ("each",)
    return tuple(s for s in SHAPES if s not in ("yes/no", "each"))


def _words_outside(question: str, names: Sequence[str]) -> list[str]:
    """The question's words without those of the names it holds (longest names first)."""
    words = _words(question)
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        named = _words(name)
        at = _name_at(words, named)
        while named and at is not None:
            words = [*words[:at], *words[at + len(named) :]]
            at = _name_at(words, named)
    return words


# Comparatives that ask which of two or more is first by a number ("Which is larger, A or B?").
_MORE = frozenset(
    {"larger", "bigger", "more", "greater", "higher", "longer", "taller", "older", "heavier", "richer"}
)
_LESS = frozenset({"smaller", "less", "fewer", "lower", "shorter", "younger", "lighter", "poorer"})


def _comparative(words: Sequence[str]) -> str | None:
    """ "largest" or "smallest" for a question comparing by a number, from its first comparative.
    Measured: "Which is larger, Georgia or South Korea?" and "Which city is bigger, Delmas or Pest?"
    were shaped "list" and planned as the places one is located in."""
    for word in words:
        if word in _MORE:
            return "largest"
        if word in _LESS:
            return "smallest"
    return None


# Superlatives, and words that ask for the first or last by a number, besides the comparatives.
_RANKING = frozenset(
    {
        "largest",
        "biggest",
        "most",
        "greatest",
        "highest",
        "longest",
        "tallest",
        "oldest",
        "heaviest",
        "richest",
        "smallest",
        "least",
        "fewest",
        "lowest",
        "shortest",
        "youngest",
        "lightest",
        "poorest",
        "maximum",
        "minimum",
        "populous",
        "top",
        "rank",
        "ranked",
        "compare",
        "compared",
    }
)


def _ranking_words(words: Sequence[str]) -> bool:
    """Whether the question's words ask for an order by a number: a comparative or a superlative
    ("larger", "the most inhabitants"). Measured: "What is the capital of Cambodia?" was shaped
    "smallest" by population and answered "Phnom Penh is the smallest by population"; "and what is
    its capital?" the same."""
    return any(w in _MORE or w in _LESS or w in _RANKING for w in words)


def _per_item_words(words: Sequence[str]) -> bool:
    """Whether the question asks something of each item ("what currency does each use", "for every
    neighbour", "the neighbours with their capitals", "Ghana's neighbours and their currencies"). Measured: "List the neighbours of Liberia
    with their capitals" was shaped "list", and answered with the capitals alone."""
    if "each" in words or "every" in words:
        return "how" not in words
    return any(
        (a == "with" and b in _POSSESSIVES) or (a, b) == ("and", "their")
        for a, b in itertools.pairwise(words)
    )


_POSSESSIVES = frozenset({"their", "its", "his", "her"})


def shape_schema(named: Sequence[Mention], question: str = "") -> dict[str, Any]:
    """The JSON Schema of the first plan step: the answer's shape only, among those the question's
    grammar allows (comparisons only when the named entities have numbers to compare)."""
    return {
        "type": "object",
        "properties": {"answer": {"enum": allowed_shapes(named, question)}},
        "required": ["answer"],
        "additionalProperties": False,
    }


def allowed_shapes(named: Sequence[Mention], question: str = "") -> list[str]:
    """The shapes the plan may take: the grammar's (``grammar_shapes``), comparisons only with numbers."""
    numbers = any(m.numbers for m in named)
    names = [m.name for m in named]
    shapes = grammar_shapes(question, names) if question else SHAPES
    ranks = numbers and (not question or _ranking_words(_words_outside(question, names)))
    allowed = [s for s in shapes if ranks or s not in ("largest", "smallest")]
    # A comparison between entities with no numbers to compare is planned as any other question.
    return allowed or [s for s in SHAPES if s not in ("yes/no", "largest", "smallest")]


def plan_schema(
    named: Sequence[Mention], relationships: Sequence[Relationship], shape: str = "list"
) -> dict[str, Any]:
    """The JSON Schema of a plan for a shape: a named entity as the start, one of this graph's entity
    types, a list of this graph's relationship types (two at least for "each"), maybe a second named
    entity, and for largest/smallest the number compared."""
    names = list(dict.fromkeys(m.name for m in named))
    types = sorted(
        {r.source for r in relationships} | {r.target for r in relationships} | {m.type for m in named}
    )
    rel_list: dict[str, Any] = {
        "type": "array",
        "items": {"enum": sorted({r.type for r in relationships})},
        "maxItems": PLAN_MAX_HOPS,
    }
    main_list = {**rel_list, "minItems": 2} if shape == "each" else rel_list
    numbers = sorted({n for m in named for n in m.numbers})
    properties: dict[str, Any] = {
        "start": {"enum": names},
        "asks_for": {"enum": types},
        "relationships": main_list,
        "and": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {"start": {"enum": names}, "relationships": rel_list},
                    "required": ["start", "relationships"],
                    "additionalProperties": False,
                },
            ]
        },
    }
    if shape in ("largest", "smallest") and numbers:
        properties["property"] = {"enum": numbers}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def graph_lines(relationships: Sequence[Relationship]) -> str:
    """This graph's relationships, one a line, for the system prompt."""
    return "\n".join(f"- {r.source} -{r.type}-> {r.target}" for r in relationships)


def plan_system_part(relationships: Sequence[Relationship]) -> str:
    """What the system prompt says about plans: the graph's relationships, the rules and the examples."""
    return f"This graph's relationships (source type -TYPE-> target type):\n{graph_lines(relationships)}\n{PLAN_RULES}"


_GLUE = GLUE
_words = words_of


_SUFFIXES = ("ions", "ion", "ors", "ers", "ing", "ed", "es", "or", "er", "s")


def _stem(word: str) -> str:
    """The word without one common English ending, and a doubled last consonant made single
    ("acted", "actors" -> "act"; "starred", "stars" -> "star")."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            return stem[:-1] if len(stem) >= 4 and stem[-1] == stem[-2] else stem
    return word


def _alike(word: str, other: str) -> bool:
    """Whether two words look like forms of one word: a shared start of at least four letters that
    is most of the shorter one ("border"/"borders", "director"/"directed", "year"/"years"), or one
    stem of three letters at least ("acted"/"actors"). Measured on MetaQA: "who acted in the movies
    written by X" named no STARRED_ACTORS, and its plan stopped one hop short."""
    shared = 0
    for a, b in zip(word, other, strict=False):
        if a != b:
            break
        shared += 1
    if word == other or (shared >= 4 and shared >= 0.7 * min(len(word), len(other))):
        return True
    stem = _stem(word)
    return len(stem) >= 3 and stem == _stem(other)


# Irregular English verb forms and the form a relationship's name uses ("who wrote" WRITTEN_BY,
# "where was X born" BORN_IN, "spoken" SPEAKS): the prefix rule of ``_alike`` cannot see them.
# Measured on MetaQA: "who wrote X" got no relationship hint and was planned as DIRECTED_BY.
_IRREGULAR = {
    form: lemma
    for lemma, forms in {
        "write": (
            "wrote",
            "written",
            "writer",
            "writers",
            "writes",
            "screenwriter",
            "screenwriters",
            "scriptwriter",
            "scriptwriters",
        ),
        "speak": ("spoke", "spoken", "speaker", "speakers", "speaks"),
        "bear": ("born", "bore", "birth"),
        "make": ("made",),
        "lead": ("led", "leader", "leaders"),
        "build": ("built",),
        "buy": ("bought",),
        "sell": ("sold",),
        "win": ("won", "winner", "winners"),
        "teach": ("taught", "teacher", "teachers"),
        "sing": ("sang", "sung", "singer", "singers"),
        "hold": ("held",),
        "give": ("gave", "given"),
        "take": ("took", "taken"),
        "know": ("knew", "known"),
        "grow": ("grew", "grown"),
        "fight": ("fought",),
        "draw": ("drew", "drawn"),
        "choose": ("chose", "chosen"),
        "fly": ("flew", "flown"),
        "run": ("ran",),
        "begin": ("began", "begun"),
        "meet": ("met",),
        "pay": ("paid",),
        "shoot": ("shot",),
        "found": ("founder", "founders"),
        # Countries that border one are its neighbours, in either spelling.
        "border": ("neighbour", "neighbours", "neighbor", "neighbors", "neighbouring", "neighboring"),
    }.items()
    for form in forms
}


def _lemma(word: str) -> str:
    return _IRREGULAR.get(word, word)


def word_hints(question: str, relationships: Sequence[Relationship]) -> tuple[list[str], list[str]]:
    """The graph's entity types and relationship types whose names the question's words use, in
    the question's order ("countries" Country, "border" BORDERS, "currency" USES_CURRENCY).

    Measured on the demo graph: without them the model chose relationships the question never
    named ("And its currency?" -> CAPITAL_OF, SPEAKS)."""
    words = _words(question)
    types = sorted({r.source for r in relationships} | {r.target for r in relationships})
    rel_types = sorted({r.type for r in relationships})

    def first(names: Sequence[str]) -> list[str]:
        found = []
        for name in names:
            parts = [_lemma(w) for w in _words(name) if w not in _GLUE]
            positions = [i for i, w in enumerate(words) if any(_alike(_lemma(w), p) for p in parts)]
            if positions:
                found.append((positions[0], name))
        return [name for _, name in sorted(found)]

    return first(types), first(rel_types)


# Words that make the relationship next to them a shared one, followed there and back: "the films
# that share actors with X", "the same director as X", "co-starred with X" (the relationship after
# them); "who wrote films together with X" (the one before).
_SHARED_NEXT = frozenset({"share", "shares", "shared", "sharing", "same", "co"})
_SHARED_BEFORE = frozenset({"together"})
_ARTICLES = frozenset({"the", "a", "an"})
# Between the name and a word after it, these start the question's main clause ("the films that
# share actors with X are directed by whom", "the actor of X also starred in which films").
_MAIN_CLAUSE = frozenset({"is", "are", "was", "were", "also"})
_WH = frozenset({"who", "whom", "which", "what"})
_AGENT_ENDINGS = ("or", "ors", "er", "ers", "ist", "ists")
_NEAR = 3


@dataclass
class _Hit:
    """A word of the question that names a relationship."""

    at: int
    rel: str
    agent: bool  # a noun for who does it ("writer", "actors"): it names the entity in between
    answer: bool  # it names the answers' type, not a hop ("release years", "which actors")
    outer: bool = False
    twice: bool = False


def _relationship_named(word: str, parts: dict[str, list[str]]) -> str | None:
    """The one relationship type whose name the word uses (None for none, or for several)."""
    found = [t for t, names in parts.items() if any(_alike(_lemma(word), p) for p in names)]
    return found[0] if len(found) == 1 else None


def _name_at(words: Sequence[str], name: Sequence[str]) -> int | None:
    return next(
        (i for i in range(len(words) - len(name) + 1) if name and words[i : i + len(name)] == name), None
    )


def word_path(question: str, start: str, relationships: Sequence[Relationship]) -> list[str]:
    """The relationships the question's words name, nearest to the start's name first, with
    repeats: in English a chain of phrases grows outward from the entity it starts at ("who
    directed the films starred by the actors in X": STARRED_ACTORS, STARRED_ACTORS, DIRECTED_BY).
    Empty when the name is not among the question's words.

    - Words side by side that name one relationship count once ("release years").
    - A word that names the answers' type beside another word for its relationship is no hop
      ("what year was X released", "starred which actors").
    - Words after the name past "is/are/was/were/also", or followed by "who/which/what", belong to
      the main clause, and come after all others ("the films that share actors with X are
      directed by whom").
    - Next to "share", "same", "co-" or "together" a relationship is followed there and back.
    - A noun for who does it ("the writer of X") names the entity in between: when the next word
      names another relationship, the path comes back along the noun's first ("who directed films
      for the writer of X": WRITTEN_BY, WRITTEN_BY, DIRECTED_BY). Right before the name with an
      article ("the director X") it says what the start is: no hop, but the way out of it.

    Measured on MetaQA: the model listed a chain's relationships in either order and without
    repeats ("who directed movies that share actors with Zombieland": DIRECTED_BY, STARRED_ACTORS),
    and the loop went DIRECTED_BY first."""
    words = _words(question)
    at = _name_at(words, _words(start))
    if at is None:
        return []
    end = at + len(_words(start))
    hits, role = _hits(words, at, end, relationships)
    _mark_shared(words, hits)

    def distance(hit: _Hit) -> tuple[int, int, int]:
        return int(hit.outer), (at - hit.at if hit.at < at else hit.at - end + 1), hit.at

    ordered = sorted(hits, key=distance)
    path: list[str] = []
    if role is not None and (not ordered or ordered[0].rel != role):
        path.append(role)
    for k, hit in enumerate(ordered):
        path.append(hit.rel)
        after = ordered[k + 1].rel if k + 1 < len(ordered) else None
        if hit.twice or (hit.agent and after is not None and after != hit.rel):
            path.append(hit.rel)
    return path


def _schema_words(relationships: Sequence[Relationship]) -> tuple[dict[str, list[str]], list[str]]:
    """Each relationship type's naming words (lemmas, no glue), and the entity types' words."""
    parts = {
        t: [_lemma(w) for w in _words(t) if w not in _GLUE] for t in sorted({r.type for r in relationships})
    }
    types = [
        _lemma(w)
        for t in {r.source for r in relationships} | {r.target for r in relationships}
        for w in _words(t)
    ]
    return parts, types


def word_leanings(question: str, start: str, relationships: Sequence[Relationship]) -> dict[str, float]:
    """How near by meaning each relationship type is to the question's words that name none by
    their letters (``meaning.similarities``; outside the start's name, no function words): the
    nearest word's similarity, where it is above zero. Used only to order paths that fit the plan
    equally well (``best_paths``), so a weak leaning never outweighs a word that names a
    relationship, the plan, or the type asked for."""
    words = _words(question)
    at = _name_at(words, _words(start))
    span = range(at, at + len(_words(start))) if at is not None else range(0)
    parts, types = _schema_words(relationships)
    lean: dict[str, float] = {}
    for i, word in enumerate(words):
        if i in span or not _content_word(word, types) or _relationship_named(word, parts):
            continue
        for rel, score in similarities(word, relationships).items():
            if score > max(lean.get(rel, 0.0), 0.0):
                lean[rel] = score
    return lean


def _hits(
    words: Sequence[str], at: int, end: int, relationships: Sequence[Relationship]
) -> tuple[list[_Hit], str | None]:
    """The words outside the name ``words[at:end]`` that name a relationship (see ``word_path``),
    and the start's own relationship ("the director X"), if a word says it."""
    parts, types = _schema_words(relationships)
    hits: list[_Hit] = []
    role: str | None = None
    named = {
        _relationship_named(w, parts) for i, w in enumerate(words) if not at <= i < end and w not in _GLUE
    }
    for i, word in enumerate(words):
        if at <= i < end or word in _GLUE:
            continue
        rel = _relationship_named(word, parts)
        if rel is None and _content_word(word, types):
            rel = relationship_by_meaning(word, relationships)
            # By meaning only what no word names by its letters, once: "what money do they use in
            # X" names USES_CURRENCY by "use", and "money" must not make it a second hop.
            rel = None if rel in named else rel
            named.add(rel)
        if rel is None or (hits and (hits[-1].at, hits[-1].rel) == (i - 1, rel)):
            continue
        if i == at - 1 and i > 0 and words[i - 1] in _ARTICLES:
            role = rel
            continue
        agent = word.endswith(_AGENT_ENDINGS)
        answer = any(_alike(_lemma(word), t) for t in types) or (agent and i > 0 and words[i - 1] in _WH)
        outer = i >= end and (
            bool(_MAIN_CLAUSE & set(words[end:i])) or (i + 1 < len(words) and words[i + 1] in _WH)
        )
        hits.append(_Hit(i, rel, agent, answer, outer))
    return [h for h in hits if not h.answer or not any(o.rel == h.rel and not o.answer for o in hits)], role


# Words that name no relationship whatever their meaning: they are not looked up by meaning.
_FUNCTION_WORDS = _AUXILIARIES | _QUESTION_WORDS | _ARTICLES | _POSSESSIVES | _MAIN_CLAUSE | _GLUE


def _content_word(word: str, types: Sequence[str]) -> bool:
    """Whether a word the relationship names do not hold is looked up by meaning
    (``meaning.relationship_by_meaning``): not a function word, a number, or a word for one of the
    graph's entity types ("films", "countries": they name the answers, not a hop)."""
    return (
        len(word) >= 3
        and not word.isdigit()
        and word not in _FUNCTION_WORDS
        and word not in _SHARED_NEXT | _SHARED_BEFORE
        and not any(_alike(_lemma(word), t) for t in types)
    )


def _mark_shared(words: Sequence[str], hits: Sequence[_Hit]) -> None:
    """Mark the relationships next to "share", "same", "co-" or "together" as followed twice."""
    for c, word in enumerate(words):
        if word in _SHARED_NEXT:
            near = [h for h in hits if 0 < h.at - c <= _NEAR]
        elif word in _SHARED_BEFORE:
            near = [h for h in reversed(hits) if 0 < c - h.at <= _NEAR]
        else:
            continue
        # Only where no other word names it: "the films directed by the same director as X" goes
        # there and back once.
        if near and not any(h is not near[0] and h.rel == near[0].rel for h in hits):
            near[0].twice = True


def plan_request(
    question: str,
    named: Sequence[Mention],
    earlier: str | None = None,
    relationships: Sequence[Relationship] = (),
) -> str:
    """The user message of both plan steps: the question, the entities it names, and the types and
    relationships its words name (the second step adds the shape the first chose)."""
    listing = ", ".join(
        f"{m.name}: {m.type}" + (f" (numbers: {', '.join(m.numbers)})" if m.numbers else "") for m in named
    )
    before = f"(The question before: {earlier})\n" if earlier else ""
    types, rel_types = word_hints(question, relationships)
    hints = ""
    if types:
        hints += f"\nTypes its words name: {', '.join(types)}"
    if rel_types:
        hints += f"\nRelationships its words name: {', '.join(rel_types)}"
    return f"{before}Question: {question}\nEntities named: {listing}{hints}"


def _inversions(used: Sequence[str], order: Sequence[str]) -> int:
    """How many pairs of the path's relationships come in the other order than ``order`` has them."""
    first = {rel: i for i, rel in reversed(list(enumerate(order)))}
    at = [first[rel] for rel in used if rel in first]
    return sum(1 for i, j in itertools.combinations(range(len(at)), 2) if at[i] > at[j])


def path_rank(
    option: PathOption, mentioned: Sequence[str], asks_for: str | None, order: Sequence[str] = ()
) -> tuple[int, ...]:
    """How well a typed path fits what the plan said (lower is better): the relationships it uses
    against those mentioned, counted with repeats, plus whether it ends at the type asked for; then
    whether it ends there, whether it uses every relationship mentioned, its length, and whether it
    takes them in the order mentioned (or its reverse). Measured: the model often names a
    relationship once where the path goes there and back ("the movies that share directors with
    X"), so a longer path that ends at the type asked for beats a shorter one that does not."""
    used = [h[0] for h in option.hops]
    differ = sum(((Counter(used) - Counter(mentioned)) + (Counter(mentioned) - Counter(used))).values())
    misses = int(asks_for is not None and option.end != asks_for)
    unused = len(set(mentioned) - set(used))
    # A relationship the question did not mention, where one it did would connect as well (the films
    # "starred by actors in X" go back along STARRED_ACTORS, not along DIRECTED_BY).
    others = len(set(used) - set(mentioned))
    in_order = used in (list(mentioned), list(reversed(mentioned)))
    # The order of the question's words (``word_path``), nearest to the start first, when known.
    return differ + misses, misses, unused, others, len(used), _inversions(used, order), int(not in_order)


def best_paths(
    start_type: str,
    mentioned: Sequence[str],
    asks_for: str | None,
    relationships: Sequence[Relationship],
    order: Sequence[str] = (),
    lean: dict[str, float] | None = None,
) -> list[PathOption]:
    """The typed paths from ``start_type`` that fit the plan best (all of them when several tie),
    those whose relationships the question's words lean to by meaning first (``lean``: see
    ``word_leanings``). The loop runs the tied paths in this order and answers from the first that
    finds something: measured on MetaQA's dev split, "who is the author of X" named no
    relationship by its letters, and DIRECTED_BY, WRITTEN_BY and STARRED_ACTORS tied, DIRECTED_BY
    first."""
    options = typed_paths(start_type, relationships)
    if not options:
        return []
    ranks = {o: path_rank(o, mentioned, asks_for, order) for o in options}
    best = min(ranks.values())
    tied = [o for o in options if ranks[o] == best]
    if lean:
        tied.sort(key=lambda o: -sum(lean.get(h[0], 0.0) for h in o.hops))
    return tied


def _rels(value: Any) -> list[str]:
    return [str(r) for r in value] if isinstance(value, list) else []


def _hops(option: PathOption, relationships: Sequence[Relationship]) -> list[dict[str, Any]]:
    """The path's hops as ``query_paths`` takes them. A relationship between entities of one type
    (BORDERS) is followed both ways: a plan names no direction, and a graph may store it one way."""
    same = {r.type for r in relationships if r.source == r.target}
    return [
        {"relationship": r, "direction": "both" if r in same else d, "type": t} for r, d, t in option.hops
    ]


def _and_paths(
    entity: Mention, other: dict[str, Any] | None, end: str, relationships: Sequence[Relationship]
) -> list[PathOption]:
    """The paths from the second named entity to the answers' type: none when the plan names no
    relationship for it ("does A border B": B itself), else the shortest that reach that type,
    those using the relationships it named first. Measured: the model repeated the first path's
    relationships for the second entity ("bordering Malawi speak Tonga": BORDERS, SPEAKS from
    Tonga), which a longest fit would follow."""
    mentioned = _rels(other.get("relationships") if other else None)
    options = [p for p in typed_paths(entity.type, relationships) if p.end == end]
    if not mentioned:
        return [p for p in options if not p.hops]
    options = [p for p in options if p.hops]
    if not options:
        return []
    shortest = min(len(p.hops) for p in options)
    return sorted((p for p in options if len(p.hops) == shortest), key=lambda p: path_rank(p, mentioned, end))


def _ranked(arguments: dict[str, Any], prop: Any, others: Sequence[Mention], shape: str) -> str:
    """A largest/smallest plan: the property ranked by, and the result shape (a list without one)."""
    if prop is None:
        return "entities"
    arguments["property"] = prop
    if others:
        # Two named entities compared: the entities themselves, whatever path was named.
        arguments["hops"] = []
        arguments["start"] += [{"key": k} for m in others for k in m.keys]
    return shape


def _intersect(
    arguments: dict[str, Any],
    others: Sequence[Mention],
    other: dict[str, Any] | None,
    end: str,
    relationships: Sequence[Relationship],
) -> None:
    """Keep only the answers also reached from the second named entity (or both starts' neighbours)."""
    second = [(m, p) for m in others for p in _and_paths(m, other, end, relationships)]
    if not second:
        return
    member, path = second[0]
    within: dict[str, Any] = {"start": [{"key": k} for k in member.keys], "hops": _hops(path, relationships)}
    if arguments["hops"]:
        arguments["hops"][-1]["in_path"] = within
    else:
        arguments["start"] += within["start"]
        arguments["start_match"] = "all"


def _itself(
    shape: str, others: Sequence[Mention], other: dict[str, Any] | None, end: str
) -> dict[str, Any] | None:
    """The second entity's part of a yes/no plan: the entity itself when it is of the type the main
    path reaches ("does A border B": is B among A's neighbours), whatever relationships the plan
    named for it. Measured: "Does Sierra Leone border Liberia?" was planned with BORDERS from
    Liberia too, which asks whether a neighbour of Sierra Leone borders Liberia (Guinea does)."""
    if shape == "exists" and other is not None and all(m.type == end for m in others):
        return {**other, "relationships": []}
    return other


def _reached_other(
    other: dict[str, Any],
    others: Sequence[Mention],
    mentioned: list[str],
    asks_for: str | None,
    relationships: Sequence[Relationship],
) -> dict[str, Any]:
    """The second entity's part of a plan that gives it no relationships though it is not of the type
    asked for: the last of the plan's relationships that reaches its type, moved to its side (the
    answers are not the entity itself, they are related to it). Measured: "which of the
    countries that border Turkmenistan use the Tenge" was planned as BORDERS, USES_CURRENCY with the
    Tenge alone on the other side; as written it asks which currencies are the Tenge."""
    if _rels(other.get("relationships")) or not asks_for or any(m.type == asks_for for m in others):
        return other
    kinds = {m.type for m in others}
    touching = [
        rel for rel in mentioned if any(r.type == rel and kinds & {r.source, r.target} for r in relationships)
    ]
    if not touching or len(touching) == len(mentioned):
        return other
    return {**other, "relationships": touching[-1:]}


def _one_hop_each(
    start_type: str,
    other_type: str,
    mentioned: list[str],
    other: dict[str, Any],
    asks_for: str | None,
    relationships: Sequence[Relationship],
) -> tuple[str, str] | None:
    """The relationship of each side, when a plan names the same ones on both and one hop of each
    reaches the type asked for from its own start, in one way only: (the start's, the other's).
    When the plan asks for the start's own type (or none), any type both sides reach that way.
    Measured: "which of the countries that border Tanzania use the Congolese Franc" was planned from
    the Franc as BORDERS, USES_CURRENCY with Tanzania's side the same (asking for Country in one run,
    for Currency in another); followed as written it names the neighbours of the countries that use
    the Franc. From a currency only USES_CURRENCY reaches a country, and from Tanzania only BORDERS
    does, so each side has one."""
    second = _rels(other.get("relationships"))
    if len(set(mentioned)) < 2 or Counter(mentioned) != Counter(second):
        return None

    def reaching(kind: str, goal: str) -> set[str]:
        return {
            r.type
            for r in relationships
            if r.type in mentioned
            and ((r.source == kind and r.target == goal) or (r.target == kind and r.source == goal))
        }

    everything = {r.source for r in relationships} | {r.target for r in relationships}
    goals = [asks_for] if asks_for and asks_for != start_type else sorted(everything)
    pairs = {
        (a, b)
        for goal in goals
        for a in reaching(start_type, goal)
        for b in reaching(other_type, goal)
        if a != b
    }
    return pairs.pop() if len(pairs) == 1 else None


def _main_relationships(mentioned: list[str], second: list[str]) -> list[str]:
    """The main path's relationships without those the second entity's path names (each relationship
    the question mentions once is followed once). Measured: "which of the countries that border China
    use the Indian Rupee" was planned from the Rupee as USES_CURRENCY, BORDERS with China's BORDERS
    besides, which crosses one border too many. When nothing would be left, the plan stays."""
    left = Counter(mentioned) - Counter(second)
    if not sum(left.values()):
        return mentioned
    kept = []
    for rel in mentioned:
        if left[rel] > 0:
            kept.append(rel)
            left[rel] -= 1
    return kept


def _per_item(
    option: PathOption, used: Sequence[str], hinted: Sequence[str], relationships: Sequence[Relationship]
) -> PathOption | None:
    """A list's path one hop longer, along a relationship the question's words name but the plan left
    out, from the type it reaches ("which countries border X, and what currency does each use":
    BORDERS, then USES_CURRENCY for each); None when there is none."""
    for rel in hinted:
        if rel in used:
            continue
        for r in relationships:
            if r.type == rel and r.source == option.end:
                return PathOption(option.start, (*option.hops, (r.type, "out", r.target)))
            if r.type == rel and r.target == option.end:
                return PathOption(option.start, (*option.hops, (r.type, "in", r.source)))
    return None


def implied_and(
    plan: dict[str, Any], named: Sequence[Mention], hinted: Sequence[str]
) -> dict[str, Any] | None:
    """The second named entity a plan left out: another entity the question names (not part of the
    start's own name) that the answers must also be related to, along the relationships the
    question's words name (none for yes/no: "is X the capital of Y" asks about Y itself); None when
    the plan has one, names no start, is "each" or a comparison, or the question names nothing else.

    Measured: "Is Polokwane the capital of South Africa" was planned from Polokwane as CAPITAL_OF
    with no second entity, so any capital said yes; "which countries border both A and B" and
    "which neighbours of A use the Naira" were planned with "and": null and answered with every
    neighbour of A."""
    start = plan.get("start")
    shape = str(plan.get("answer") or "list")
    if plan.get("and") or not isinstance(start, str) or shape in ("each", "largest", "smallest"):
        return None
    folded = start.casefold()
    for other in named:
        name = other.name.casefold()
        if other.name != start and name not in folded and folded not in name:
            relationships = [] if shape == "yes/no" else list(hinted)
            return {"start": other.name, "relationships": relationships}
    return None


def _from_words(
    question: str,
    start: Mention,
    mentioned: Sequence[str],
    asks_for: str | None,
    relationships: Sequence[Relationship],
    values: Mapping[str, Sequence[str]] | None = None,
) -> tuple[list[str], list[str], str | None]:
    """A chain from one named entity as the question's words say it: the relationships they name
    from the start (``word_path``), then those the plan names more often than they do (words the
    loop cannot match: "what type of film", "how famous", "appears in"); the words' order; and the
    type asked for, a time when the question asks "when". When the words name no relationship and
    the plan names one at most, the relationship they name by its values (``value_path``), with
    the type it reaches asked for, wins over the plan's."""
    order = word_path(question, start.name, relationships)
    if (
        not order
        and len(mentioned) <= 1
        and values
        and (by_values := value_path(question, start, values, relationships))
    ):
        return [by_values.type], [by_values.type], by_values.target
    chain = [*order, *(Counter(mentioned) - Counter(order)).elements()]
    return chain, order, _time_type(question, start.name, relationships) or asks_for


def value_path(
    question: str, start: Mention, values: Mapping[str, Sequence[str]], relationships: Sequence[Relationship]
) -> Relationship | None:
    """The one relationship out of the start's type that the question's words name by its values
    (``meaning.relationship_by_values``: a few names of the entities it reaches, and its name),
    for a question whose words name no relationship by their letters or alone by meaning; None
    when none stands out. The words compared: the question's outside the start's name, without
    function words ("how popular of a movie is X": "popular movie").

    Measured (docs/evals.md): on MetaQA's dev questions from a film whose words name
    no relationship, the model's plan took the hop asked for 8 times of 24 ("how popular": the
    rating, not the votes; "what words describe": the genre, not the tags); by the values' names,
    of 614 such questions (half the dev split) 154 were chosen, all right."""
    words = _words(question)
    name = _words(start.name)
    at = _name_at(words, name)
    if at is None:  # the start's name is not among the words: which words are the rest is unknown
        return None
    outside = [*words[:at], *words[at + len(name) :]]
    text = " ".join(w for w in outside if w not in _FUNCTION_WORDS)
    leaving = {r.type: r for r in relationships if r.source == start.type}
    if not text or not leaving:
        return None
    chosen = relationship_by_values(text, values, relationships, leaving)
    return leaving[chosen] if chosen is not None else None


_TIME_WORDS = frozenset({"year", "date", "time", "day", "decade"})


def _time_type(question: str, start: str, relationships: Sequence[Relationship]) -> str | None:
    """The graph's one type for a time, when the question asks "when" (outside the start's name):
    measured, the model planned "when were the films directed by X released" as ending at the
    films."""
    words = _words(question)
    at = _name_at(words, _words(start))
    outside = words if at is None else [*words[:at], *words[at + len(_words(start)) :]]
    if "when" not in outside:
        return None
    found = {t for r in relationships for t in (r.source, r.target) if _lemma(_words(t)[-1]) in _TIME_WORDS}
    return next(iter(found)) if len(found) == 1 else None


def plan_candidates(
    plan: dict[str, Any],
    named: Sequence[Mention],
    relationships: Sequence[Relationship],
    limit: int = 500,
    hinted: Sequence[str] = (),
    question: str = "",
    values: Mapping[str, Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """The ``query_paths`` arguments of a plan, best first (see ``_candidates``). A plan that leaves
    out another entity the question names (``implied_and``) is tried with it first, as a
    constraint on the answers, and then as written (the loop answers from the first that finds
    something); a yes/no only with it (without, any match would say yes)."""
    implied = implied_and(plan, named, hinted)
    if implied is None:
        return _candidates(plan, named, relationships, limit, hinted, question, values)
    constrained = _candidates({**plan, "and": implied}, named, relationships, limit, hinted, question, values)
    if str(plan.get("answer")) == "yes/no" and constrained:
        return constrained
    plain = _candidates(plan, named, relationships, limit, hinted, question, values)
    return [*constrained, *[c for c in plain if c not in constrained]][: MAX_CANDIDATES + 1]


def _ranked_paths(
    starts: Sequence[Mention],
    mentioned: Sequence[str],
    asks_for: str | None,
    relationships: Sequence[Relationship],
    question: str,
    values: Mapping[str, Sequence[str]] | None = None,
) -> list[tuple[tuple[int, ...], Mention, PathOption]]:
    """The typed paths from each start that fit the plan best, best first; with ``question``, as
    its words name the chain from the start (``_from_words``)."""
    ranked: list[tuple[tuple[int, ...], Mention, PathOption]] = []
    for start in starts:
        chain, order, asked = list(mentioned), list[str](), asks_for
        if question:
            chain, order, asked = _from_words(question, start, mentioned, asks_for, relationships, values)
        if asked == start.type and (len(order) > 1 or all(n == 1 for n in Counter(chain).values())):
            # Measured: the model often names the start's own type ("what kind of film is X": Movie);
            # a path back to that type goes there and back, which it writes as a relationship named
            # twice ("the films with the same director"), so once each it is not followed back; and
            # the question's words say a way there and back themselves ("who wrote movies that
            # share directors with X" was planned as asking for Movie).
            asked = None
        if question and asked in (None, start.type):
            asked = _type_named(question, start, relationships) or asked
        lean = word_leanings(question, start.name, relationships) if question else None
        for option in best_paths(start.type, chain, asked, relationships, order, lean):
            ranked.append((path_rank(option, chain, asked, order), start, option))
    # Paths from starts of one name that fit equally well: the one the question writes as its name
    # is written first ("described by jack arnold": the Tag "jack arnold", not the Person).
    ranked.sort(key=lambda item: (item[0], question != "" and item[1].name not in question))
    return ranked


def _type_named(question: str, start: Mention, relationships: Sequence[Relationship]) -> str | None:
    """The entity type the question asks for by name right after "which" or "what" ("on which
    continent is X"), outside the start's name, when it is another than the start's own; None
    otherwise. Measured: "On which continent is Garwenranland?" was planned as LOCATED_IN asking for
    Country, the start's own type; both ways along LOCATED_IN fit, the cities in it came first and
    the answer named a continent the graph does not hold ("Europe"). Any type the words name was
    too much: in "who wrote the screenplay for the movies directed by X" the movies are the way, not
    the answer (MetaQA 2-hop 0.95 -> 0.80)."""
    words = _words_outside(question, [start.name])
    asked = {
        types[0]
        for wh, word in itertools.pairwise(words)
        if wh in ("which", "what") and len(types := word_hints(word, relationships)[0]) == 1
    }
    return asked.pop() if len(asked) == 1 and start.type not in asked else None


def same_named(named: Sequence[Mention], name: Any) -> list[Mention]:
    """The named entities a plan's start means: every one of that name, case aside, whatever its
    type. Measured on MetaQA: "what movies can be described by jack arnold" named the Person "Jack
    Arnold" and the Tag "jack arnold"; the plan chose the Person, and the loop followed HAS_TAGS
    from that person's films (31 films, none right). Offered both, the paths from each are ranked
    together, so the start whose type the plan's relationships leave from wins."""
    if not isinstance(name, str):
        return []
    folded = name.casefold()
    return [m for m in named if m.name.casefold() == folded]


def _candidates(
    plan: dict[str, Any],
    named: Sequence[Mention],
    relationships: Sequence[Relationship],
    limit: int = 500,
    hinted: Sequence[str] = (),
    question: str = "",
    values: Mapping[str, Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """The ``query_paths`` arguments of a plan, best first: one per typed path that fits it best
    (several when they tie: the loop answers from the first that finds something); none when the
    plan names no entity of the question. ``hinted``: the relationships the question's words name;
    a list or count from one named entity follows the relationships ``question``'s words name
    from it (``word_path``) where the plan says otherwise; ``values``: a few names of the entities
    each relationship type reaches (``value_path``)."""
    starts = same_named(named, plan.get("start"))
    asks_for = plan.get("asks_for") if isinstance(plan.get("asks_for"), str) else None
    mentioned = _rels(plan.get("relationships"))
    shape = RESULT_SHAPES.get(str(plan.get("answer")), "entities")
    other = plan.get("and") if isinstance(plan.get("and"), dict) else None
    others = [m for m in same_named(named, other.get("start") if other else None) if m not in starts]
    if others and other is not None:
        other = _reached_other(other, others, mentioned, asks_for, relationships)
        if starts and (
            split := _one_hop_each(starts[0].type, others[0].type, mentioned, other, asks_for, relationships)
        ):
            mentioned, other = [split[0]], {**other, "relationships": [split[1]]}
        mentioned = _main_relationships(mentioned, _rels(other.get("relationships")))
    by_words = question if not others and shape in ("entities", "count") else ""
    ranked = _ranked_paths(starts, mentioned, asks_for, relationships, by_words, values)
    candidates = []
    for _, start, option in ranked[:MAX_CANDIDATES]:
        arguments: dict[str, Any] = {
            "start": [{"key": k} for k in start.keys],
            "hops": _hops(option, relationships),
            "limit": limit,
        }
        result = shape
        if shape == "entities" and not others and option.hops:
            longer = _per_item(option, [*mentioned, *[h[0] for h in option.hops]], hinted, relationships)
            if longer is not None:
                option, result = longer, "group"
                arguments["hops"] = _hops(option, relationships)
        if shape in ("max", "min"):
            result = _ranked(
                arguments, plan.get("property") or next(iter(start.numbers), None), others, shape
            )
        elif others:
            _intersect(
                arguments, others, _itself(shape, others, other, option.end), option.end, relationships
            )
        if result == "group" and len(option.hops) < 2:
            result = "entities"
        arguments["result"] = result
        if arguments not in candidates:
            candidates.append(arguments)
    return candidates


def parse_plan(text: str) -> dict[str, Any] | None:
    try:
        plan = json.loads(text)
    except json.JSONDecodeError:
        return None
    return plan if isinstance(plan, dict) else None

"""Words to relationships: which of the graph's relationship types (and entity types) a question's
words name, by their letters (``grammar``'s stems and irregular forms), by meaning (``meaning``) or
by the names of the entities a relationship reaches (``value_path``), and in which order they
chain outward from the start (``word_path``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apps.agents.loop.grammar import (
    ARTICLES,
    FUNCTION_WORDS,
    MAIN_CLAUSE,
    alike,
    lemma,
    name_at,
    words_outside,
)
from apps.agents.loop.meaning import (
    GLUE,
    relationship_by_meaning,
    relationship_by_values,
    similarities,
    words_of,
)
from apps.agents.loop.plan_graph import Mention, Relationship


def word_hints(question: str, relationships: Sequence[Relationship]) -> tuple[list[str], list[str]]:
    """The graph's entity types and relationship types whose names the question's words use, in
    the question's order ("countries" Country, "border" BORDERS, "currency" USES_CURRENCY).

    Measured on the demo graph: without them the model chose relationships the question never
    named ("And its currency?" -> CAPITAL_OF, SPEAKS)."""
    words = words_of(question)
    types = sorted({r.source for r in relationships} | {r.target for r in relationships})
    rel_types = sorted({r.type for r in relationships})

    def first(names: Sequence[str]) -> list[str]:
        found = []
        for name in names:
            parts = [lemma(w) for w in words_of(name) if w not in GLUE]
            positions = [i for i, w in enumerate(words) if any(alike(lemma(w), p) for p in parts)]
            if positions:
                found.append((positions[0], name))
        return [name for _, name in sorted(found)]

    return first(types), first(rel_types)


# Words that make the relationship next to them a shared one, followed there and back: "the films
# that share actors with X", "the same director as X", "co-starred with X" (the relationship after
# them); "who wrote films together with X" (the one before).
_SHARED_NEXT = frozenset({"share", "shares", "shared", "sharing", "same", "co"})
_SHARED_BEFORE = frozenset({"together"})
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
    found = [t for t, names in parts.items() if any(alike(lemma(word), p) for p in names)]
    return found[0] if len(found) == 1 else None


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
    words = words_of(question)
    at = name_at(words, words_of(start))
    if at is None:
        return []
    end = at + len(words_of(start))
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
        t: [lemma(w) for w in words_of(t) if w not in GLUE] for t in sorted({r.type for r in relationships})
    }
    types = [
        lemma(w)
        for t in {r.source for r in relationships} | {r.target for r in relationships}
        for w in words_of(t)
    ]
    return parts, types


def word_leanings(question: str, start: str, relationships: Sequence[Relationship]) -> dict[str, float]:
    """How near by meaning each relationship type is to the question's words that name none by
    their letters (``meaning.similarities``; outside the start's name, no function words): the
    nearest word's similarity, where it is above zero. Used only to order paths that fit the plan
    equally well (``best_paths``), so a weak leaning never outweighs a word that names a
    relationship, the plan, or the type asked for."""
    words = words_of(question)
    at = name_at(words, words_of(start))
    span = range(at, at + len(words_of(start))) if at is not None else range(0)
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
        _relationship_named(w, parts) for i, w in enumerate(words) if not at <= i < end and w not in GLUE
    }
    for i, word in enumerate(words):
        if at <= i < end or word in GLUE:
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
        if i == at - 1 and i > 0 and words[i - 1] in ARTICLES:
            role = rel
            continue
        agent = word.endswith(_AGENT_ENDINGS)
        answer = any(alike(lemma(word), t) for t in types) or (agent and i > 0 and words[i - 1] in _WH)
        outer = i >= end and (
            bool(MAIN_CLAUSE & set(words[end:i])) or (i + 1 < len(words) and words[i + 1] in _WH)
        )
        hits.append(_Hit(i, rel, agent, answer, outer))
    return [h for h in hits if not h.answer or not any(o.rel == h.rel and not o.answer for o in hits)], role


# Words that name no relationship whatever their meaning: they are not looked up by meaning.


def _content_word(word: str, types: Sequence[str]) -> bool:
    """Whether a word the relationship names do not hold is looked up by meaning
    (``meaning.relationship_by_meaning``): not a function word, a number, or a word for one of the
    graph's entity types ("films", "countries": they name the answers, not a hop)."""
    return (
        len(word) >= 3
        and not word.isdigit()
        and word not in FUNCTION_WORDS
        and word not in _SHARED_NEXT | _SHARED_BEFORE
        and not any(alike(lemma(word), t) for t in types)
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
    words = words_of(question)
    name = words_of(start.name)
    at = name_at(words, name)
    if at is None:  # the start's name is not among the words: which words are the rest is unknown
        return None
    outside = [*words[:at], *words[at + len(name) :]]
    text = " ".join(w for w in outside if w not in FUNCTION_WORDS)
    leaving = {r.type: r for r in relationships if r.source == start.type}
    if not text or not leaving:
        return None
    chosen = relationship_by_values(text, values, relationships, leaving)
    return leaving[chosen] if chosen is not None else None


_TIME_WORDS = frozenset({"year", "date", "time", "day", "decade"})


def time_type(question: str, start: str, relationships: Sequence[Relationship]) -> str | None:
    """The graph's one type for a time, when the question asks "when" (outside the start's name):
    measured, the model planned "when were the films directed by X released" as ending at the
    films."""
    words = words_of(question)
    at = name_at(words, words_of(start))
    outside = words if at is None else [*words[:at], *words[at + len(words_of(start)) :]]
    if "when" not in outside:
        return None
    found = {t for r in relationships for t in (r.source, r.target) if lemma(words_of(t)[-1]) in _TIME_WORDS}
    return next(iter(found)) if len(found) == 1 else None


def type_named(question: str, start: Mention, relationships: Sequence[Relationship]) -> str | None:
    """The entity type the question asks for by name right after "which" or "what" ("on which
    continent is X"), outside the start's name, when it is another than the start's own; None
    otherwise. Measured: "On which continent is Garwenranland?" was planned as LOCATED_IN asking for
    Country, the start's own type; both ways along LOCATED_IN fit, the cities in it came first and
    the answer named a continent the graph does not hold ("Europe"). Any type the words name was
    too much: in "who wrote the screenplay for the movies directed by X" the movies are the way, not
    the answer (MetaQA 2-hop 0.95 -> 0.80)."""
    words = words_outside(question, [start.name])
    asked = {
        types[0]
        for wh, word in itertools.pairwise(words)
        if wh in ("which", "what") and len(types := word_hints(word, relationships)[0]) == 1
    }
    return asked.pop() if len(asked) == 1 and start.type not in asked else None

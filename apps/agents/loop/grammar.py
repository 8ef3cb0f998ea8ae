"""The question's grammar, as the plan step reads it: the answer shapes its words allow, its
comparatives, and the forms of a word (stems, irregular verbs) that name the graph's types.

Nothing here knows the graph: ``word_relationships`` matches these words to its relationships and
``plan`` offers the shapes to the model.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from apps.agents.loop.meaning import GLUE, words_of
from apps.agents.loop.plan_graph import SHAPES

# Words that open a question answered yes or no ("Does A border B?", "Is X the capital of Y?").
AUXILIARIES = frozenset(
    {"is", "are", "was", "were", "do", "does", "did", "has", "have", "had", "can", "could", "will", "would"}
)
# Words that ask for a count without "how many" ("the number of films", "count the …").
COUNT_WORDS = frozenset({"number", "count", "total", "many"})
QUESTION_WORDS = frozenset(
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
    - Only a question that asks something of each item (``per_item_words``) is shaped "each":
      measured, the follow-up "What about its continent?" was shaped "each" and answered with the
      capital the turn before had named.
    - A count otherwise needs a word that asks one ("the number of films", "count", "in total"):
      offered to any question, the model chose it for some that ask none, and their answers
      ended with a stray "In all: 1.".
    """
    words = words_outside(question, names)
    if "whether" in words:
        return ("yes/no",)
    if "or" in words and (compared := comparative(words)):
        return (compared,)
    asks = any(w in QUESTION_WORDS for w in words)
    polite = len(words) > 1 and words[1] == "you"
    if words and words[0] in AUXILIARIES and not asks and not polite:
        return ("yes/no",)
    if ("how", "many") in itertools.pairwise(words):
        return ("count", "each") if "each" in words or "every" in words else ("count",)
    if per_item_words(words):
        return ("each",)
    counts = COUNT_WORDS.intersection(words)
    return tuple(s for s in SHAPES if s not in ("yes/no", "each") and (s != "count" or counts))


def words_outside(question: str, names: Sequence[str]) -> list[str]:
    """The question's words without those of the names it holds (longest names first)."""
    words = words_of(question)
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        named = words_of(name)
        at = name_at(words, named)
        while named and at is not None:
            words = [*words[:at], *words[at + len(named) :]]
            at = name_at(words, named)
    return words


# Comparatives that ask which of two or more is first by a number ("Which is larger, A or B?").
MORE = frozenset(
    {"larger", "bigger", "more", "greater", "higher", "longer", "taller", "older", "heavier", "richer"}
)
LESS = frozenset({"smaller", "less", "fewer", "lower", "shorter", "younger", "lighter", "poorer"})


def comparative(words: Sequence[str]) -> str | None:
    """ "largest" or "smallest" for a question comparing by a number, from its first comparative.
    Measured: "Which is larger, Georgia or South Korea?" and "Which city is bigger, Delmas or Pest?"
    were shaped "list" and planned as the places one is located in."""
    for word in words:
        if word in MORE:
            return "largest"
        if word in LESS:
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


def ranking_words(words: Sequence[str]) -> bool:
    """Whether the question's words ask for an order by a number: a comparative or a superlative
    ("larger", "the most inhabitants"). Measured: "What is the capital of Cambodia?" was shaped
    "smallest" by population and answered "Phnom Penh is the smallest by population"; "and what is
    its capital?" the same."""
    return any(w in MORE or w in LESS or w in _RANKING for w in words)


def per_item_words(words: Sequence[str]) -> bool:
    """Whether the question asks something of each item ("what currency does each use", "for every
    neighbour", "the neighbours with their capitals", "Ghana's neighbours and their currencies"). Measured: "List the neighbours of Liberia
    with their capitals" was shaped "list", and answered with the capitals alone."""
    if "each" in words or "every" in words:
        return "how" not in words
    return any(
        (a == "with" and b in POSSESSIVES) or (a, b) == ("and", "their") for a, b in itertools.pairwise(words)
    )


POSSESSIVES = frozenset({"their", "its", "his", "her"})


_SUFFIXES = ("ions", "ion", "ors", "ers", "ing", "ed", "es", "or", "er", "s")


def stem(word: str) -> str:
    """The word without one common English ending, and a doubled last consonant made single
    ("acted", "actors" -> "act"; "starred", "stars" -> "star")."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            return stem[:-1] if len(stem) >= 4 and stem[-1] == stem[-2] else stem
    return word


def alike(word: str, other: str) -> bool:
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
    root = stem(word)
    return len(root) >= 3 and root == stem(other)


# Irregular English verb forms and the form a relationship's name uses ("who wrote" WRITTEN_BY,
# "where was X born" BORN_IN, "spoken" SPEAKS): the prefix rule of ``alike`` cannot see them.
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


def lemma(word: str) -> str:
    return _IRREGULAR.get(word, word)


def name_at(words: Sequence[str], name: Sequence[str]) -> int | None:
    return next(
        (i for i in range(len(words) - len(name) + 1) if name and words[i : i + len(name)] == name), None
    )


ARTICLES = frozenset({"the", "a", "an"})
# Between the name and a word after it, these start the question's main clause ("the films that
# share actors with X are directed by whom", "the actor of X also starred in which films").
MAIN_CLAUSE = frozenset({"is", "are", "was", "were", "also"})

# Words that name no relationship whatever their meaning: they are not looked up by meaning.
FUNCTION_WORDS = AUXILIARIES | QUESTION_WORDS | ARTICLES | POSSESSIVES | MAIN_CLAUSE | GLUE

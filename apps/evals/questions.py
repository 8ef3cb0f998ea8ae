"""Eval questions: their kinds, the templates they are written from, and how to read one back.

Every question set (demo, fictional, generated) writes its questions from these templates, so
the perfect planner (``apps.evals.planner``) can tell what is asked from the text alone, the
way a person reads a question, without ever seeing the expected answer.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal[
    "one_hop", "two_hop", "list", "absent", "count",
    "inverse", "yes_no", "intersection", "filtered", "per_item", "inverse_count", "compare", "follow_up", "casual",
    "1-hop", "2-hop", "3-hop",
]  # fmt: skip
# The kinds of the generated sets (demo, fictional, generated), in report order.
BASIC_KINDS: tuple[Kind, ...] = ("one_hop", "two_hop", "list", "absent", "count")
SHAPE_KINDS: tuple[Kind, ...] = (
    "inverse", "yes_no", "intersection", "filtered", "per_item", "inverse_count", "compare", "follow_up", "casual",
)  # fmt: skip
KINDS: tuple[Kind, ...] = (*BASIC_KINDS, *SHAPE_KINDS)
# MetaQA's questions, by their number of hops.
METAQA_KINDS: tuple[Kind, ...] = ("1-hop", "2-hop", "3-hop")

# template id -> text with {slots}. Absent questions reuse the templates of real ones; several
# templates per kind, so no kind is asked in one phrasing only. A casual template is asked in
# lower case, its names too.
TEMPLATES: dict[str, str] = {
    "capital": "What is the capital of {country}?",
    "currency": "Which currency does {country} use?",
    "continent": "On which continent is {country}?",
    "city_capital": "What is the capital of the country in which the city {city} lies?",
    "city_currency": "Which currency is used in the country in which the city {city} lies?",
    "borders": "Which countries border {country}?",
    "cities_over": "Which cities in {country} have more than {n} inhabitants?",
    "languages": "Which languages are spoken in {country}?",
    "count_borders": "How many countries border {country}?",
    "targets": "Which entities does the {type} {name} have a {rel} relationship to?",
    # inverse facts
    "capital_of_1": "{city} is the capital of which country?",
    "capital_of_2": "Which country has {city} as its capital?",
    "capital_of_3": "Of which country is {city} the capital?",
    "currency_of_1": "Which country uses the {currency}?",
    "currency_of_2": "The {currency} is the currency of which country?",
    "sources": "Which entities have a {rel} relationship to the {type} {name}?",
    # yes/no
    "borders_yn_1": "Does {a} border {b}?",
    "borders_yn_2": "Is {a} a neighbour of {b}?",
    "borders_yn_3": "Do {a} and {b} share a border?",
    "capital_yn": "Is {city} the capital of {country}?",
    "targets_yn": "Does the {type} {name} have a {rel} relationship to {other}?",
    # intersections
    "borders_both_1": "Which countries border both {a} and {b}?",
    "borders_both_2": "What countries share a border with both {a} and {b}?",
    "borders_both_3": "Name the countries that are neighbours of {a} and also of {b}.",
    "targets_both": "Which entities do both the {type} {a} and the {type} {b} have a {rel} relationship to?",
    # filtered lists
    "neighbours_currency_1": "Which of the countries that border {country} use the {currency}?",
    "neighbours_currency_2": "Which neighbours of {country} use the {currency}?",
    "neighbours_language": "Which countries bordering {country} speak {language}?",
    "targets_filtered": (
        "Which of the entities that the {type} {name} has a {rel} relationship to have a {rel2} relationship to {other}?"
    ),
    # per-item second hops
    "each_currency_1": "Which countries border {country}, and what currency does each use?",
    "each_currency_2": "For each neighbour of {country}, name its currency.",
    "each_capital": "List the neighbours of {country} with their capitals.",
    "targets_each": (
        "For each entity that the {type} {name} has a {rel} relationship to, which entities does it have a {rel2} "
        "relationship to?"
    ),
    # counts over an inverse relationship
    "currency_count_1": "How many countries use the {currency}?",
    "currency_count_2": "In how many countries is the {currency} the currency?",
    "language_count": "In how many countries is {language} spoken?",
    "sources_count": "How many entities have a {rel} relationship to the {type} {name}?",
    # comparisons of a numeric property
    "larger_area": "Which is larger, {a} or {b}?",
    "more_people": "Which has more inhabitants, {a} or {b}?",
    "bigger_city_1": "Which city is bigger, {a} or {b}?",
    "bigger_city_2": "Does {a} or {b} have the larger population?",
    "larger_property": "Which has the larger {prop}, the {type} {a} or the {type} {b}?",
    # follow-ups: asked after the question in ``prelude``, in the same conversation
    "its_currency": "And its currency?",
    "its_capital": "and what is its capital?",
    "its_neighbours": "Which countries border it?",
    "its_continent": "What about its continent?",
    "its_targets": "And which entities does it have a {rel} relationship to?",
    # casual phrasing, lower case
    "casual_capital_1": "whats the capital of {country}",
    "casual_capital_2": "{country} capital?",
    "casual_currency": "what money do they use in {country}",
    "casual_neighbours": "who are {country}'s neighbours",
    "casual_city_country": "what country is {city} in",
    "casual_targets": "what does {name} have a {rel} relationship to",
}
CASUAL = frozenset(t for t in TEMPLATES if t.startswith("casual_"))

_SLOT = re.compile(r"\\\{(\w+)\\\}")

_APOSTROPHES = str.maketrans("", "", "'’`")
_NON_WORD = re.compile(r"[^0-9a-z]+")


_NON_WORD_CASED = re.compile(r"[^0-9a-zA-Z]+")


def _unaccented(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def normalise(text: str) -> str:
    """Lower case, no accents, no apostrophes, words separated by single spaces."""
    return " ".join(_NON_WORD.sub(" ", _unaccented(text).casefold().translate(_APOSTROPHES)).split())


def cased_words(text: str) -> list[str]:
    """``normalise``'s words of ``text`` with their case kept (the same words, one for one, unless
    folding the case splits a letter, as "ß" into "ss")."""
    return _NON_WORD_CASED.sub(" ", _unaccented(text).translate(_APOSTROPHES)).split()


def _pattern(template: str) -> re.Pattern[str]:
    seen: set[str] = set()

    def slot(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in seen:  # a slot written twice holds the same value twice
            return rf"(?P={name})"
        seen.add(name)
        return rf"(?P<{name}>\S+)" if name in {"type", "rel", "rel2"} else rf"(?P<{name}>.+?)"

    flags = re.IGNORECASE if template in (TEMPLATES.get(t) for t in CASUAL) else 0
    return re.compile(rf"^{_SLOT.sub(slot, re.escape(template))}$", flags)


def _literal(template: str) -> int:
    return len(_SLOT.sub("", re.escape(template)).replace("\\", ""))


# The most specific templates are tried first: "What is the capital of the country in which the
# city X lies?" also reads as "capital of {country}", "Which countries border both A and B?" as
# "Which countries border {country}?". Those with more literal text come first.
_PATTERNS = [
    (tid, _pattern(TEMPLATES[tid])) for tid in sorted(TEMPLATES, key=lambda t: -_literal(TEMPLATES[t]))
]


@dataclass(frozen=True)
class Question:
    """One question and what a right answer must contain.

    ``expected`` holds the names a right answer names (one for one- and two-hop facts, all of
    them for lists, none for absent questions); ``count`` the number a count question asks for;
    ``wrong`` the names a right answer must not name (the neighbours of only one of two countries,
    the neighbours with another currency, the other entity of a comparison); ``answer`` "yes" or
    "no" for a yes/no question; ``pairs`` each item of a per-item question with the names that
    belong to it (a neighbour and its currency); ``prelude`` the messages asked before it in the
    same conversation (a follow-up's first question).
    """

    id: str
    set: str
    kind: Kind
    template: str
    text: str
    expected: tuple[str, ...] = ()
    count: int | None = None
    slots: dict[str, str] = field(default_factory=dict, compare=False)
    wrong: tuple[str, ...] = ()
    answer: str | None = None
    pairs: tuple[tuple[str, tuple[str, ...]], ...] = ()
    prelude: tuple[str, ...] = ()


def ask(
    *,
    set_name: str,
    kind: Kind,
    template: str,
    index: int,
    expected: tuple[str, ...] = (),
    count: int | None = None,
    wrong: tuple[str, ...] = (),
    answer: str | None = None,
    pairs: tuple[tuple[str, tuple[str, ...]], ...] = (),
    prelude: tuple[str, ...] = (),
    **slots: object,
) -> Question:
    """Write a question from its template (a casual one in lower case, names too).

    A question must read back as its template and slots (``question_parse``): a name with " and "
    in "Do {a} and {b} share a border?" would not; callers skip those (``reads_back``)."""
    values = {k: f"{v:,}" if isinstance(v, int) else str(v) for k, v in slots.items()}
    if template in CASUAL:
        values = {k: v.lower() if k in {"country", "city", "name"} else v for k, v in values.items()}
    return Question(
        id=f"{set_name}-{kind}-{index}",
        set=set_name,
        kind=kind,
        template=template,
        text=TEMPLATES[template].format(**values),
        expected=expected,
        count=count,
        slots=values,
        wrong=wrong,
        answer=answer,
        pairs=pairs,
        prelude=prelude,
    )


Maker = Callable[[int], "Question | None"]


def draw(makers: dict[Kind, Maker], per_kind: int) -> list[Question]:
    """``per_kind`` questions of each kind, each text once, each one that reads back as its template.

    A maker is called with the number of distinct questions of its kind drawn so far; it may return
    None (nothing to ask this time), and is given ``per_kind * 20`` attempts."""
    questions: list[Question] = []
    for kind, make in makers.items():
        seen: set[tuple[str, ...]] = set()
        attempts = 0
        while sum(1 for q in questions if q.kind == kind) < per_kind and attempts < per_kind * 20:
            attempts += 1
            question = make(len(seen))
            # A follow-up's text repeats ("And its currency?"): its conversation tells it apart.
            asked = (*question.prelude, question.text) if question is not None else ()
            if question is not None and asked not in seen and reads_back(question):
                seen.add(asked)
                questions.append(question)
    return questions


def reads_back(question: Question) -> bool:
    """Whether the question's text parses as its own template and slots (one reading only)."""
    return question_parse(question.text) == (question.template, question.slots)


def question_parse(text: str) -> tuple[str, dict[str, str]] | None:
    """Return (template id, slots) of a question written from a template, or None."""
    text = text.strip()
    for tid, pattern in _PATTERNS:
        match = pattern.match(text)
        if match:
            return tid, match.groupdict()
    return None


_SYLLABLES = (
    "ka",
    "lo",
    "ran",
    "vel",
    "dor",
    "mi",
    "sha",
    "tor",
    "ben",
    "qua",
    "zel",
    "fin",
    "gar",
    "nu",
    "pel",
    "os",
    "tri",
    "wen",
    "yar",
    "bre",
    "cul",
    "dim",
    "ev",
    "hal",
    "jor",
    "kes",
    "lum",
    "mor",
)
_ENDINGS = ("ia", "ovia", "istan", "land", "ora", "enne", "ar", "ica", "eth", "und")


def invented_name(rng: random.Random, *, taken: set[str], endings: tuple[str, ...] = _ENDINGS) -> str:
    """A pronounceable made-up name whose normalised form is not in ``taken`` (which it joins)."""
    while True:
        stem = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3)))
        name = (stem + rng.choice(endings)).capitalize()
        if normalise(name) not in taken:
            taken.add(normalise(name))
            return name

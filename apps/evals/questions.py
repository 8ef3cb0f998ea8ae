"""Eval questions: their kinds, the templates they are written from, and how to read one back.

Every question set (demo, fictional, generated) writes its questions from these templates, so
the perfect planner (``apps.evals.planner``) can tell what is asked from the text alone, the
way a person reads a question, without ever seeing the expected answer.
"""

from __future__ import annotations

import random
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["one_hop", "two_hop", "list", "absent", "count"]
KINDS: tuple[Kind, ...] = ("one_hop", "two_hop", "list", "absent", "count")

# template id -> text with {slots}. Absent questions reuse the templates of real ones.
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
}

_SLOT = re.compile(r"\\\{(\w+)\\\}")

_APOSTROPHES = str.maketrans("", "", "'’`")
_NON_WORD = re.compile(r"[^0-9a-z]+")


def normalise(text: str) -> str:
    """Lower case, no accents, no apostrophes, words separated by single spaces."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(_NON_WORD.sub(" ", plain.casefold().translate(_APOSTROPHES)).split())


def _pattern(template: str) -> re.Pattern[str]:
    def slot(match: re.Match[str]) -> str:
        name = match.group(1)
        return rf"(?P<{name}>\S+)" if name in {"type", "rel"} else rf"(?P<{name}>.+?)"

    return re.compile(rf"^{_SLOT.sub(slot, re.escape(template))}$")


# "What is the capital of the country in which the city X lies?" also reads as "capital of
# {country}": the two-hop templates are tried first.
_FIRST = ("city_capital", "city_currency")
_PATTERNS = [(tid, _pattern(TEMPLATES[tid])) for tid in (*_FIRST, *(t for t in TEMPLATES if t not in _FIRST))]


@dataclass(frozen=True)
class Question:
    """One question and what a right answer must contain.

    ``expected`` holds the names a right answer names (one for one- and two-hop facts, all of
    them for lists, none for absent questions); ``count`` the number a count question asks for.
    """

    id: str
    set: str
    kind: Kind
    template: str
    text: str
    expected: tuple[str, ...] = ()
    count: int | None = None
    slots: dict[str, str] = field(default_factory=dict, compare=False)


def ask(
    *,
    set_name: str,
    kind: Kind,
    template: str,
    index: int,
    expected: tuple[str, ...] = (),
    count: int | None = None,
    **slots: object,
) -> Question:
    """Write a question from its template."""
    values = {k: f"{v:,}" if isinstance(v, int) else str(v) for k, v in slots.items()}
    return Question(
        id=f"{set_name}-{kind}-{index}",
        set=set_name,
        kind=kind,
        template=template,
        text=TEMPLATES[template].format(**values),
        expected=expected,
        count=count,
        slots=values,
    )


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

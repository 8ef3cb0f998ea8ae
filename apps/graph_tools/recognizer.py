"""The names a text mentions, found by rules without a model (issue #48, the mention index).

Read by the documents app (a passage's mentions, the walk's seeds) and by the small-model loop (a
question's names, ``agents/loop/questions.py``), so it lives beneath both: pure text rules.

A passage's mentions link it to the other passages that name the same thing, which is what the
walk of ``documents/walk.py`` follows from a question's own mentions. No NLP model ships inside a
package its authors publish on PyPI (spaCy's English pipelines are released on GitHub, and the
PyPI copies are third parties' uploads), so the recognizer is rules over the text, as the issue
allows where no such model serves:

- **names**: runs of capitalised words, joined by the lower-case particles names carry ("Battle
  of Hastings", "Leopoldo Torre Nilsson", "Ludwig van Beethoven"), without the capitalised function
  words a sentence starts with ("The", "In", "Who");
- **quoted titles**: text in double quotes, up to ``MAX_QUOTED_CHARS``;
- **dates**: "12 March 1950", "March 12, 1950", "March 1950";
- **the title**: a document's heading, or the leading ``Title: `` of its first line.

Each mention carries its ``normalised`` form, the key that makes two spellings one name: accents,
case, punctuation, a possessive "'s", a parenthesised qualifier ("Palo Alto (2013 film)") and a
leading "the" aside.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

MentionKind = Literal["title", "name", "quoted", "date"]

# Longest quoted title, and longest name (in characters) kept as a mention.
MAX_QUOTED_CHARS = 80
MAX_NAME_CHARS = 120
# A first line's "Title: " prefix is a title only up to this many characters.
MAX_TITLE_CHARS = 150

# Lower-case words that join the capitalised words of one name.
PARTICLES = frozenset(
    "of the de du des la le les von van der den da di del della y al el bin ibn zu dos das do".split()
)
# Capitalised words that start a sentence or a question rather than a name: at the start of a
# run they are left out, and alone they are no mention.
FUNCTION_WORDS = frozenset(
    """a an the he she it they we you i his her its their our your this that these those in on at by
    for from with as after before during who what which when where why how whose whom is was are were
    did do does has have had there both although while since because if but and or however also
    according not one two many some most all other another to of no yes so then than such each every
    be being been can could would should will may might must shall here once""".split()
)
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH = "|".join(MONTHS)
_MONTH_WORDS = frozenset(m.casefold() for m in MONTHS)

_TOKEN = re.compile(r"[^\W_][\w'’\-.]*[\w]|[^\W_]|\S", re.UNICODE)
_DATE = re.compile(
    rf"\b(?:\d{{1,2}} (?:{_MONTH}) \d{{3,4}}|(?:{_MONTH}) \d{{1,2}}, \d{{3,4}}|(?:{_MONTH}) \d{{3,4}})\b"
)
_QUOTED = re.compile(rf"[\"“]([^\"“”\n]{{2,{MAX_QUOTED_CHARS}}})[\"”]")
_HEADING = re.compile(rf"\A\s*#{{1,6}}[ \t]+([^\n]{{1,{MAX_TITLE_CHARS}}})")
_TITLE_PREFIX = re.compile(rf"\A\s*([^\n:]{{1,{MAX_TITLE_CHARS}}}):\s")
_QUALIFIER = re.compile(r"\([^)]*\)")
_POSSESSIVE = re.compile(r"['’]s\b")
_NOT_WORD = re.compile(r"[^\w\s]")


@dataclass(frozen=True)
class Mention:
    """One mention: its character span in the text, as written, its kind and ``normalised`` key."""

    start: int
    end: int
    surface: str
    kind: MentionKind
    normalised: str


def normalise(surface: str) -> str:
    """The key under which two spellings of a name are one: "Arrête ton cinéma" and "Arrete Ton
    Cinema" are ``arrete ton cinema``; "Palo Alto (2013 film)" is ``palo alto``; "The Beatles'"
    and "Beatles" are ``beatles``. Empty when nothing of a name is left."""
    text = unicodedata.normalize("NFKD", surface)
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    text = _QUALIFIER.sub(" ", text.replace("&", " and "))
    text = _NOT_WORD.sub(" ", _POSSESSIVE.sub("", text))
    text = " ".join(text.split())
    return text[4:] if text.startswith("the ") else text


def _capitalised(token: str) -> bool:
    return token[:1].isupper() and token[:1].isalpha()


def _names(text: str) -> list[tuple[int, int]]:
    """The spans of the runs of capitalised words (with the particles between them)."""
    tokens = [(m.start(), m.end(), m.group(0)) for m in _TOKEN.finditer(text)]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(tokens):
        if not _capitalised(tokens[i][2]):
            i += 1
            continue
        last = j = i
        while j + 1 < len(tokens) and text[tokens[j][1] : tokens[j + 1][0]] in (" ", ""):
            word = tokens[j + 1][2]
            if _capitalised(word):
                j = last = j + 1
            elif word.casefold() in PARTICLES and j + 2 < len(tokens) and _capitalised(tokens[j + 2][2]):
                j += 1
            else:
                break
        first = i
        while first <= last and tokens[first][2].casefold() in FUNCTION_WORDS:
            first += 1
        if first <= last:
            spans.append((tokens[first][0], tokens[last][1]))
        i = last + 1
    return spans


def title_of(text: str) -> tuple[int, int] | None:
    """The span of a text's title: a Markdown heading on its first line, or a short ``Title: ``
    prefix of it that starts with a capital ("Palo Alto (2013 film): Palo Alto is…")."""
    for pattern in (_HEADING, _TITLE_PREFIX):
        match = pattern.match(text)
        if match and _capitalised(match.group(1).strip()):
            start = match.start(1) + (len(match.group(1)) - len(match.group(1).lstrip()))
            return start, match.end(1) - (len(match.group(1)) - len(match.group(1).rstrip()))
    return None


def mentions_find(text: str, *, title: bool = False) -> list[Mention]:
    """The mentions of ``text``, in order of their place; with ``title``, its title first.

    A name that is a single function word or a month alone is no mention; the same span is
    reported once (as its most specific kind: title, then date, then quoted, then name).
    """
    found: dict[tuple[int, int], MentionKind] = {}
    if title and (span := title_of(text)) is not None:
        found[span] = "title"
    for match in _DATE.finditer(text):
        found.setdefault(match.span(), "date")
    for match in _QUOTED.finditer(text):
        found.setdefault(match.span(1), "quoted")
    for span in _names(text):
        if span[1] - span[0] <= MAX_NAME_CHARS:
            found.setdefault(span, "name")
    mentions = []
    for (start, end), kind in found.items():
        surface = text[start:end]
        key = normalise(surface)
        if len(key) < 2 or key in _MONTH_WORDS or key in FUNCTION_WORDS:
            continue
        mentions.append(Mention(start=start, end=end, surface=surface, kind=kind, normalised=key))
    mentions.sort(key=lambda m: (m.kind != "title", m.start, m.end))
    return mentions

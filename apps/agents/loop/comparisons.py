"""Comparisons in a question read against passages (issue #48): the same asked of two named things,
joined by "or" ("Who was born first, A or B?") or "and" ("Were A and B born in the same place?").
``comparison`` gives each thing's own question ("When was A born?") and how the two answers decide
(the earlier or later date, or whether they are the same), so the loop compares the values it read
(``compared``) instead of asking a small model to. Rules over English, not a parser: the names are
the mention recognizer's, widened to whole titles as ``questions`` widens them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from apps.agents.loop.questions import name_end, name_start, named_mentions
from apps.graph_tools.recognizer import Mention

Decision = Literal["earlier", "later", "longer", "same", "choose"]


@dataclass(frozen=True)
class Comparison:
    """Two named things compared: each one's own question, and how their answers decide.

    ``decision``: ``earlier``/``later`` pick the thing whose answer is the earlier/later date;
    ``longer`` the one whose answer spans more years (born and died); ``same`` answers yes or no; ``choose`` leaves the choice to the model."""

    things: tuple[str, str]
    asks: tuple[str, str]
    decision: Decision


_YES_NO = re.compile(r"^\s*(?:is|are|was|were|do|does|did|has|have|had)\b", re.IGNORECASE)
# (what the question says, the question each thing gets ({x}: the thing, {role}: "the director of "),
# how the answers decide). The first that matches the question (its two things left out) counts.
_ASKS: tuple[tuple[str, str, Decision], ...] = (
    (
        r"\blived longer\b|\blonger li(?:fe|ved)\b",
        "When was {role}{x} born, and when did {role}{x} die?",
        "longer",
    ),
    (r"\b(?:born (?:first|earlier|before)|older|oldest|elder)\b", "When was {role}{x} born?", "earlier"),
    (r"\b(?:born (?:later|last|after)|younger|youngest)\b", "When was {role}{x} born?", "later"),
    (r"\bdie[sd]? (?:first|earlier|before|sooner)\b", "When did {role}{x} die?", "earlier"),
    (r"\bdie[sd]? (?:later|last|after)\b", "When did {role}{x} die?", "later"),
    (r"\b(?:came|come|comes) out (?:first|earlier)\b", "When did {x} come out?", "earlier"),
    (r"\b(?:came|come|comes) out (?:later|last|more recently)\b", "When did {x} come out?", "later"),
    (
        r"\b(released|published|founded|established|formed|built|opened|made|produced|created)"
        r" (?:first|earlier)\b",
        "When was {x} {verb}?",
        "earlier",
    ),
    (
        r"\b(released|published|founded|established|formed|built|opened|made|produced|created)"
        r" (?:later|last|more recently)\b",
        "When was {x} {verb}?",
        "later",
    ),
    (r"\bborn in the same\b", "Where was {role}{x} born?", "same"),
    (r"\bdie[ds]? in the same\b", "Where did {role}{x} die?", "same"),
    (r"\blocated in the same country\b", "Which country is {x} located in?", "same"),
    (r"\bsame nationality\b", "What nationality is {role}{x}?", "same"),
    (r"\bfrom the same country\b|\bsame country\b", "Which country is {role}{x} from?", "same"),
)
_ROLE = re.compile(r"\b(?:has|have|had|with) the (\w+?)s?\b(?: who| that)?", re.IGNORECASE)


def _alternatives(question: str) -> tuple[Mention, Mention, str] | None:
    """The two names joined by the last " or " (or else " and ") of ``question``, and the joiner."""
    names = named_mentions(question)
    for joiner in (" or ", " and "):
        at = question.rfind(joiner)
        if at < 0:
            continue
        left = [m for m in names if m.end <= at and question[name_end(question, m) : at].strip(" ,!.?") == ""]
        after = at + len(joiner)
        right = [
            m for m in names if m.start >= after and question[after : name_start(question, m)].strip() == ""
        ]
        if left and right:
            return left[-1], right[0], joiner.strip()
    return None


def comparison(question: str) -> Comparison | None:
    """The comparison ``question`` asks of two named things, or None when it compares none."""
    found = _alternatives(question)
    if found is None:
        return None
    first, second, joiner = found
    spans = [(name_start(question, m), name_end(question, m)) for m in (first, second)]
    if question[spans[0][1] : spans[0][1] + 1] in "!?." and question[spans[0][1] : spans[0][1] + 1]:
        spans[0] = (spans[0][0], spans[0][1] + 1)  # "Love, Honor And Oh-Baby!"
    spans = _whole_titles(question, spans)
    things = (question[spans[0][0] : spans[0][1]], question[spans[1][0] : spans[1][1]])
    if joiner == "and" and not _YES_NO.match(question):
        return None
    rest = question[: spans[0][0]] + question[spans[1][1] :]
    role_match = _ROLE.search(rest)
    role = f"the {role_match.group(1).lower()} of " if role_match else ""
    for pattern, ask, rule in _ASKS:
        said = re.search(pattern, rest, re.IGNORECASE)
        if said is None:
            continue
        verb = said.group(1) if said.groups() else ""
        asks = tuple(ask.format(x=thing, role=role, verb=verb) for thing in things)
        return Comparison(things=things, asks=(asks[0], asks[1]), decision=rule)
    decision: Decision = "same" if joiner == "and" or re.search(r"\bsame\b", rest) else "choose"
    own = tuple(_alone(question, thing, other) for thing, other in (things, things[::-1]))
    return Comparison(things=things, asks=(own[0], own[1]), decision=decision)


# Words of a title before the name the recognizer found in it: each capitalised (or a number), with
# the commas, dashes and marks between them ("Love, " of "Love, Honor And Oh-Baby!").
_TITLE_WORDS = re.compile(r"(?:[\s,:;'’!&.–—-]*(?:[A-Z0-9][\w'’.!-]*))+[\s,:;'’!&.–—-]*")
# The rest of a title after the name the recognizer found, up to the question's own words: no comma
# ("Frances M|. Vega of the same nationality", "Malabimba| – The Malicious Whore?").
_TITLE_TAIL = re.compile(r"(?:[ :'’!&.–—-]+[A-Z0-9][\w'’!-]*(?:\.(?=\s))?)+")


def _whole_titles(question: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The two compared things' spans widened to whole titles: the first back to the comma that ends
    the question's own words ("Which film came out first, |Love, Honor And Oh-Baby! or …") where
    only a title's words lie between, the second on over the capitalised words that follow it ("… or
    Malabimba| – The Malicious Whore?", "Frances M|. Vega of the same nationality")."""
    (start, end), (start2, end2) = spans
    comma = question.find(", ")
    if 0 < comma and comma + 2 < start and _TITLE_WORDS.fullmatch(question[comma + 2 : start]):
        start = comma + 2
    more = _TITLE_TAIL.match(question, end2)
    if more is not None:
        end2 = more.end()
    return [(start, end), (start2, end2)]


def _alone(question: str, thing: str, other: str) -> str:
    """``question`` about ``thing`` alone: the other thing and its joiner left out."""
    text = re.sub(rf"\s*(?:,\s*)?(?:or|and)\s+{re.escape(other)}", "", question, count=1)
    text = re.sub(rf"{re.escape(other)}\s*(?:,\s*)?(?:or|and)\s+", "", text, count=1)
    return re.sub(r"\bboth\s+", "", text).replace(" ,", ",")

"""The forms a reading's answer is given in (issue #48): a nationality by the country as well as
its people ("Danish (Denmark)"), the nationality a passage describes someone by rather than the
people they descend from, and two uncertain years as either."""

from __future__ import annotations

import re

from apps.agents.loop.countries import country_of

_YEARS_OR = re.compile(r"\b(\d{3,4})/(\d{3,4})\b")
_ASKS_COUNTRY = re.compile(r"\b(?:country|countries|nationality|citizen\w*)\b", re.IGNORECASE)


def headline(question: str, answer: str) -> str:
    """The answer's first line: a country that ``question`` asks for is given in both its forms,
    the passage's first ("Danish (Denmark)", "United Kingdom (British)"; ``countries``); two years
    a passage writes as one uncertain date ("born 1322/1327") are "1322 or 1327". Another name the
    answer carries (``with_alias``) stays: "Greek (Athenian, Greece)"."""
    answer = _YEARS_OR.sub(r"\1 or \2", answer)
    if not asks_country(question):
        return answer
    # "French DJ": the nationality is its first word or words (not a two-letter code: "DJ").
    alias = _ALIAS_WRITTEN.search(answer)
    base = answer[: alias.start()] if alias is not None else answer
    words = base.split()
    firsts = [" ".join(words[:n]) for n in range(len(words), 0, -1)]
    said, country = next(
        ((first, c) for first in firsts if (first == base or len(first) > 3) and (c := country_of(first))),
        (base, None),
    )
    if country is None or not country.demonym:
        return answer
    other = country.name if said.casefold() != country.name.casefold() else country.demonym
    if alias is not None:
        return f"{said} ({alias.group(1)}, {other})"  # "Greek (Athenian)": "Greek (Athenian, Greece)"
    return f"{said} ({other})"


def asks_country(question: str) -> bool:
    """Whether ``question`` asks for a country or a nationality ("Which country …", "What nationality …")."""
    return bool(_ASKS_COUNTRY.search(question))


# "of Puerto Rican descent": the people someone descends from, not their nationality.
_DESCENT = r"\s+(?:descent|ancestry|origins?|heritage|extraction)\b"
# "… was a United States Army soldier", "is an American murderer": the capitalised words a
# passage describes someone by, where it writes the nationality first.
_DESCRIBED = re.compile(r"\b(?:is|was)\s+(?:an?|the)\s+((?:[A-Z][\w.'’-]*\s+){1,4})")


def nationality_over_descent(answer: str, text: str) -> str:
    """The nationality ``text`` describes someone by, when ``answer`` is only the people it says
    they descend from, or the last of two peoples a hyphen joins; ``answer`` otherwise.

    Measured (issue #48): "Are Christopher Newton (Criminal) and Frances M. Vega of the same
    nationality?" was answered no: Vega's passage, "… was a United States Army soldier … She is the
    first female soldier of Puerto Rican descent …", was read "Puerto Rican"."""
    if len(parts := answer.split("-")) == 2 and all(_demonym(part) for part in parts):
        # "Panamanian-American": American, of Panamanian descent (measured: "Which country the
        # performer of song I Like Control is from?", DJ Clue's, was answered so).
        return parts[1]
    if country_of(answer) is None or not re.search(re.escape(answer) + _DESCENT, text, re.IGNORECASE):
        return answer
    for described in _DESCRIBED.finditer(text):
        words = described.group(1).split()
        for n in range(len(words), 0, -1):
            said = " ".join(words[:n])
            country = country_of(said)
            if country is not None:
                return answer if country == country_of(answer) else said
    return answer


def _demonym(word: str) -> bool:
    """Whether ``word`` is a country's people ("Panamanian"), not its name ("Austria")."""
    country = country_of(word)
    return country is not None and country.demonym.casefold() == word.strip().casefold()


# Another name a passage gives right after a name: "a classical Greek (Athenian) philosopher",
# "María del Pilar Cordero, who adopted the stage name of Mapy Cortés", "… better known as …".
_ALIAS_AFTER = (
    r"(?:\s*\(([A-Z][^()\d;,:]{1,40})\)"
    r"|,?\s+(?:who\s+)?(?:adopted\s+the\s+stage\s+name(?:\s+of)?|(?:better|professionally)\s+known\s+as"
    r"|known\s+professionally\s+as|also\s+known\s+as)\s+([A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*){0,3}))"
)
# An alias ``with_alias`` wrote: "Name (Alias)".
_ALIAS_WRITTEN = re.compile(r"\s\(([^()]+)\)$")


def with_alias(answer: str, text: str) -> str:
    """``answer`` with the other name its passage ``text`` gives it right after it, in parentheses
    ("María del Pilar Cordero (Mapy Cortés)", "Greek (Athenian)"); ``answer`` when it gives none.

    Measured (issue #48): "Who is the spouse of the director of film My Three Merry Widows?" was
    answered with the birth name a passage gives before "who adopted the stage name of Mapy
    Cortés", and "What nationality is Lamprocles's father?" with "Greek" from "a classical Greek
    (Athenian) philosopher"; each question asked for the other name."""
    if not answer or "(" in answer:
        return answer
    found = re.search(re.escape(answer) + _ALIAS_AFTER, text)
    if found is None:
        return answer
    alias = (found.group(1) or found.group(2) or "").strip()
    if not alias or alias.casefold() in answer.casefold():
        return answer
    return f"{answer} ({alias})"

"""The values two compared things' readings give, and what they decide (issue #48): the date a
reading gives, the years a life spans, whether two answers name the same thing, and which of the
two things a ``comparisons.Comparison`` picks by them. Rules, so the small model never compares."""

from __future__ import annotations

import re

from apps.agents.loop.comparisons import Comparison
from apps.agents.loop.countries import country_of
from apps.graph_tools.recognizer import MONTHS, normalise

_MONTH_NUMBER = {m.casefold(): n for n, m in enumerate(MONTHS, start=1)}
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})\s+({'|'.join(MONTHS)})\s+(\d{{3,4}})\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b({'|'.join(MONTHS)})\s+(\d{{1,2}}),?\s+(\d{{3,4}})\b", re.IGNORECASE)
_YEAR = re.compile(r"\b(\d{3,4})\b(\s*(?:BC|BCE|B\.C\.))?")


def date_of(text: str) -> tuple[int, int, int] | None:
    """The first date ``text`` gives, as (year, month, day) with 0 for what it leaves out; a year
    "BC" is negative. None without a year."""
    if (dmy := _DAY_MONTH_YEAR.search(text)) is not None:
        return int(dmy.group(3)), _MONTH_NUMBER[dmy.group(2).casefold()], int(dmy.group(1))
    if (mdy := _MONTH_DAY_YEAR.search(text)) is not None:
        return int(mdy.group(3)), _MONTH_NUMBER[mdy.group(1).casefold()], int(mdy.group(2))
    if (year := _YEAR.search(text)) is not None:
        return (-int(year.group(1)) if year.group(2) else int(year.group(1))), 0, 0
    return None


def years_lived(text: str) -> int | None:
    """The years between the first and the last year ``text`` gives (a life "1939 – 2006": 67)."""
    years = [-int(m.group(1)) if m.group(2) else int(m.group(1)) for m in _YEAR.finditer(text)]
    return years[-1] - years[0] if len(years) >= 2 and years[-1] > years[0] else None


def decided(comparison: Comparison, values: tuple[str, str]) -> str | None:
    """What the two things' ``values`` answer: one of ``things``, "yes" or "no"; None when the rule
    cannot tell (no date in a value, the same date, or ``choose``)."""
    if comparison.decision in ("earlier", "later"):
        dates = date_of(values[0]), date_of(values[1])
        if dates[0] is None or dates[1] is None or dates[0] == dates[1]:
            return None
        first_is_earlier = dates[0] < dates[1]
        pick_first = first_is_earlier if comparison.decision == "earlier" else not first_is_earlier
        return comparison.things[0 if pick_first else 1]
    if comparison.decision == "longer":
        spans = years_lived(values[0]), years_lived(values[1])
        if spans[0] is None or spans[1] is None or spans[0] == spans[1]:
            return None
        return comparison.things[0 if spans[0] > spans[1] else 1]
    if comparison.decision == "same":
        return "yes" if same_value(*values) else "no"
    return None


def same_value(first: str, second: str) -> bool:
    """Whether two answers name the same thing: the same country by name or demonym ("Denmark" and
    "Danish"; "British" and "American" are not), equal names, one inside the other ("Rome" and
    "Rome, Italy"), or the same word stem ("Italy" and "Italian")."""
    a, b = normalise(first), normalise(second)
    if not a or not b:
        return False
    countries = country_of(first), country_of(second)
    if countries[0] is not None and countries[1] is not None:
        return countries[0] == countries[1]
    if a == b or f" {a} " in f" {b} " or f" {b} " in f" {a} ":
        return True
    stems = {w[:4] for w in a.split() if len(w) >= 4}
    return bool(stems & {w[:4] for w in b.split() if len(w) >= 4})

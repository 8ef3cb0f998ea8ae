"""Questions generated from any project's own graph: its facts, and entities it does not have.

For a sampled entity and relationship type, "Which entities does the <Type> <Name> have a <REL>
relationship to?" expects every target of that relationship (one target: a one-hop fact; several:
a list). Absent questions ask the same of an invented name. Only entities whose (type, name) is
unique and whose type and relationship names are single words are used, so the question has one
reading.

The shapes beyond a lookup are asked of the same facts (``shape_questions``): the sources of a
relationship (inverse), whether one entity has a relationship to another (yes/no), the targets two
entities share (intersection), the targets that have a second relationship to an entity (filtered),
each target's own targets (per item), how many sources an entity has (inverse count), which of two
entities has the larger number (compare, when entities have numeric properties), a follow-up turn
("And which entities does it have a <REL2> relationship to?") and a casual lower-case question.
"""

from __future__ import annotations

import random
import uuid
from collections import defaultdict
from typing import Any

from apps.evals.questions import Kind, Maker, Question, ask, draw, invented_name
from apps.evals.scoring import normalise
from apps.evals.selectors import Fact, graph_facts, graph_name_counts, graph_names, graph_numbers

MAX_TARGETS = 10


def generated_questions(*, project_id: uuid.UUID, per_kind: int, seed: int) -> list[Question]:
    rng = random.Random(f"generated:{project_id}:{seed}")
    groups: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
    facts = graph_facts(project_id=project_id)
    for fact in facts:
        if " " in fact.src_type or " " in fact.rel or not fact.src_name.strip():
            continue
        groups[(fact.src_key, fact.src_type, fact.src_name, fact.rel)].append(fact.dst_name)
    counts = graph_name_counts(project_id=project_id, names={k[2] for k in groups})
    single: list[tuple[tuple[str, str, str, str], list[str]]] = []
    several: list[tuple[tuple[str, str, str, str], list[str]]] = []
    for key, targets in sorted(groups.items()):
        if counts.get((key[1], key[2]), 0) != 1:
            continue
        distinct = list(dict.fromkeys(targets))
        if len(distinct) == 1:
            single.append((key, distinct))
        elif len(distinct) <= MAX_TARGETS:
            several.append((key, distinct))

    questions: list[Question] = []
    pools: tuple[tuple[Kind, list[tuple[tuple[str, str, str, str], list[str]]]], ...] = (
        ("one_hop", single),
        ("list", several),
    )
    for kind, pool in pools:
        for index, (key, targets) in enumerate(rng.sample(pool, min(per_kind, len(pool)))):
            _, type_, name, rel = key
            questions.append(
                ask(
                    set_name="generated", kind=kind, template="targets", index=index,
                    expected=tuple(targets), type=type_, name=name, rel=rel,
                )
            )  # fmt: skip
    if groups:
        taken = {normalise(n) for n in graph_names(project_id=project_id)}
        shapes = sorted({(k[1], k[3]) for k in groups})
        for index in range(per_kind):
            type_, rel = rng.choice(shapes)
            name = invented_name(rng, taken=taken)
            questions.append(
                ask(
                    set_name="generated",
                    kind="absent",
                    template="targets",
                    index=index,
                    type=type_,
                    name=name,
                    rel=rel,
                )
            )
    questions += draw(GraphShapes(project_id=project_id, facts=facts, rng=rng).makers(), per_kind)
    return questions


def _word(text: str) -> bool:
    return bool(text.strip()) and " " not in text


Src = tuple[str, str, str]  # an entity's key, type and name


class GraphShapes:
    """The shape kinds over a project's own facts (see the module's docstring), indexed once."""

    def __init__(self, *, project_id: uuid.UUID, facts: list[Fact], rng: random.Random) -> None:
        self.rng = rng
        facts = [
            f
            for f in facts
            if _word(f.src_type) and _word(f.rel) and f.src_name.strip() and f.dst_name.strip()
        ]
        self.facts = facts
        names = [f.src_name for f in facts] + [f.dst_name for f in facts]
        self.typed = graph_name_counts(project_id=project_id, names=set(names))
        self.by_name: dict[str, int] = defaultdict(int)
        for (_, name), n in self.typed.items():
            self.by_name[normalise(name)] += n
        self.sources: dict[tuple[str, str, str, str], dict[str, Fact]] = defaultdict(dict)
        self.by_src: dict[Src, dict[str, list[Fact]]] = defaultdict(lambda: defaultdict(list))
        for f in facts:
            self.by_src[(f.src_key, f.src_type, f.src_name)][f.rel].append(f)
            if _word(f.dst_type):
                self.sources[(f.dst_key, f.dst_type, f.dst_name, f.rel)][f.src_key] = f
        self.srcs = sorted(k for k in self.by_src if self.unique(k[1], k[2]))
        self.index_of = {k[0]: k for k in self.by_src}
        self.numbers = [
            n for n in graph_numbers(project_id=project_id) if _word(n[1]) and self.unique(n[1], n[2])
        ]

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

    def unique(self, type_: str, name: str) -> bool:
        return self.typed.get((type_, name), 0) == 1

    def alone(self, name: str) -> bool:
        """No other entity of any type has this name."""
        return self.by_name.get(normalise(name), 0) == 1

    def pick(self, pool: list[Any]) -> Any:
        return self.rng.choice(pool) if pool else None

    @staticmethod
    def q(kind: Kind, template: str, index: int, **fields: Any) -> Question:
        return ask(set_name="generated", kind=kind, template=template, index=index, **fields)

    def _sources(self, low: int, high: int) -> list[tuple[tuple[str, str, str, str], dict[str, Fact]]]:
        return [
            (k, fs)
            for k, fs in sorted(self.sources.items())
            if self.unique(k[1], k[2]) and low <= len(fs) <= high
        ]

    def inverse(self, index: int) -> Question | None:
        chosen = self.pick(self._sources(1, 10))
        if chosen is None:
            return None
        (_, type_, name, rel), found = chosen
        expected = tuple(dict.fromkeys(f.src_name for f in found.values()))
        return self.q("inverse", "sources", index, expected=expected, rel=rel, type=type_, name=name)

    def inverse_count(self, index: int) -> Question | None:
        chosen = self.pick(self._sources(2, 50))
        if chosen is None:
            return None
        (_, type_, name, rel), found = chosen
        return self.q(
            "inverse_count", "sources_count", index, count=len(found), rel=rel, type=type_, name=name
        )

    def yes_no(self, index: int) -> Question | None:
        src = self.pick(self.srcs)
        if src is None:
            return None
        rel = self.rng.choice(sorted(self.by_src[src]))
        mine = {f.dst_name for f in self.by_src[src][rel]}
        yes = index % 2 == 0
        if yes:
            pool = sorted(n for n in mine if self.alone(n))
        else:
            pool = sorted(
                {
                    f.dst_name
                    for f in self.facts
                    if f.rel == rel and f.dst_name not in mine and self.alone(f.dst_name)
                }
            )
        if not pool:
            return None
        return self.q(
            "yes_no", "targets_yn", index, answer="yes" if yes else "no",
            type=src[1], name=src[2], rel=rel, other=self.rng.choice(pool),
        )  # fmt: skip

    def intersection(self, index: int) -> Question | None:
        pool = []
        for rel in sorted({f.rel for f in self.facts}):
            having = [s for s in self.srcs if rel in self.by_src[s]]
            for i, a in enumerate(having[:200]):
                for b in having[i + 1 : 200]:
                    if a[1] != b[1]:
                        continue
                    ta, tb = set(_dst_names(self.by_src[a][rel])), set(_dst_names(self.by_src[b][rel]))
                    if ta & tb and len(ta | tb) <= 20:
                        pool.append((rel, a, b, ta, tb))
        chosen = self.pick(pool)
        if chosen is None:
            return None
        rel, a, b, ta, tb = chosen
        return self.q(
            "intersection", "targets_both", index,
            expected=tuple(sorted(ta & tb)), wrong=tuple(sorted(ta ^ tb)), type=a[1], a=a[2], b=b[2], rel=rel,
        )  # fmt: skip

    def _filtered_pool(self) -> list[tuple[Src, str, str, str, list[Fact], list[Fact]]]:
        pool = []
        for src in self.srcs:
            for rel, found in sorted(self.by_src[src].items()):
                if not 2 <= len(found) <= 10:
                    continue
                onward = {
                    f.dst_key: self.by_src[self.index_of[f.dst_key]]
                    for f in found
                    if f.dst_key in self.index_of
                }
                for rel2 in sorted({r for rels in onward.values() for r in rels}):
                    values: dict[str, list[Fact]] = defaultdict(list)
                    for f in found:
                        for g in onward.get(f.dst_key, {}).get(rel2, []):
                            values[g.dst_name].append(f)
                    for other, having in sorted(values.items()):
                        if self.alone(other) and 0 < len({h.dst_key for h in having}) < len(found):
                            pool.append((src, rel, rel2, other, having, found))
        return pool

    def filtered(self, index: int) -> Question | None:
        chosen = self.pick(self._filtered_pool())
        if chosen is None:
            return None
        src, rel, rel2, other, having, found = chosen
        expected = _dst_names(having)
        wrong = [n for n in _dst_names(found) if n not in expected]
        return self.q(
            "filtered", "targets_filtered", index, expected=tuple(expected), wrong=tuple(wrong),
            type=src[1], name=src[2], rel=rel, rel2=rel2, other=other,
        )  # fmt: skip

    def per_item(self, index: int) -> Question | None:
        pool = []
        for src in self.srcs:
            for rel, found in sorted(self.by_src[src].items()):
                if not 2 <= len(found) <= 6 or any(f.dst_key not in self.index_of for f in found):
                    continue
                onward = [self.by_src[self.index_of[f.dst_key]] for f in found]
                for rel2 in sorted(set.intersection(*(set(o) for o in onward))):
                    if all(1 <= len(o[rel2]) <= 3 for o in onward):
                        pairs = tuple(
                            (f.dst_name, tuple(_dst_names(o[rel2])))
                            for f, o in zip(found, onward, strict=True)
                        )
                        pool.append((src, rel, rel2, pairs))
        chosen = self.pick(pool)
        if chosen is None:
            return None
        src, rel, rel2, pairs = chosen
        return self.q(
            "per_item", "targets_each", index, expected=tuple(p[0] for p in pairs), pairs=pairs,
            type=src[1], name=src[2], rel=rel, rel2=rel2,
        )  # fmt: skip

    def compare(self, index: int) -> Question | None:
        numbers = self.numbers
        if len(numbers) < 2:
            return None
        a = self.rng.choice(numbers)
        peers = [n for n in numbers if n[1] == a[1] and n[0] != a[0] and set(n[3]) & set(a[3])]
        b = self.pick(peers)
        if b is None:
            return None
        prop = self.rng.choice(sorted(set(a[3]) & set(b[3])))
        if a[3][prop] == b[3][prop] or " " in prop:
            return None
        big, small = (a, b) if a[3][prop] > b[3][prop] else (b, a)
        return self.q(
            "compare", "larger_property", index, expected=(big[2],), wrong=(small[2],),
            prop=prop, type=a[1], a=a[2], b=b[2],
        )  # fmt: skip

    def follow_up(self, index: int) -> Question | None:
        by_src = self.by_src
        pool = [
            (s, r1, r2) for s in self.srcs for r1 in sorted(by_src[s]) for r2 in sorted(by_src[s]) if r1 != r2
        ]
        pool = [(s, r1, r2) for s, r1, r2 in pool if len(by_src[s][r2]) <= 10]
        chosen = self.pick(pool)
        if chosen is None:
            return None
        src, rel, rel2 = chosen
        prelude = ask(
            set_name="generated",
            kind="list",
            template="targets",
            index=index,
            type=src[1],
            name=src[2],
            rel=rel,
        )
        return self.q(
            "follow_up", "its_targets", index, expected=tuple(_dst_names(by_src[src][rel2])),
            prelude=(prelude.text,), rel=rel2,
        )  # fmt: skip

    def casual(self, index: int) -> Question | None:
        by_src = self.by_src
        pool = [
            (s, r)
            for s in self.srcs
            if self.alone(s[2])
            for r in sorted(by_src[s])
            if len(by_src[s][r]) <= 10
        ]
        chosen = self.pick(pool)
        if chosen is None:
            return None
        src, rel = chosen
        expected = tuple(_dst_names(by_src[src][rel]))
        return self.q("casual", "casual_targets", index, expected=expected, name=src[2], rel=rel)


def _dst_names(items: list[Fact]) -> list[str]:
    return list(dict.fromkeys(f.dst_name for f in items))

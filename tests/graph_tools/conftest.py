"""A small hand-made graph in project A and a decoy project B, embedded with the real model.

Project A
    alice  Person   -KNOWS-> bob, -WORKS_AT-> acme, -LIVES_IN-> lisbon
    bob    Person   -KNOWS-> carol
    carol  Person   -KNOWS-> alice (a cycle), -KNOWS-> dave
    acme   Company  -LOCATED_IN-> lisbon
    dave   Person, eve Person (no edges), lisbon City
Project B (never visible from A): its own "alice" and "mallory", KNOWS between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from apps.graph_tools.embeddings import graph_objects_embed
from apps.graph_tools.models import GraphObject
from apps.graph_tools.registry import tool_call
from apps.projects.models import Project
from tests.factories import make_entity, make_project, make_relationship, make_user


@dataclass
class SmallGraph:
    project: Project
    other: Project
    e: dict[str, GraphObject]
    other_e: dict[str, GraphObject]

    def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        return call_tool(self.project, name, **arguments)


def call_tool(project: Project, name: str, **arguments: Any) -> dict[str, Any]:
    return async_to_sync(tool_call)(project_id=project.id, name=name, arguments=arguments)


def build_small_graph(embed: bool = True) -> SmallGraph:
    owner = make_user()
    project = make_project(owner=owner, name="Graph A")
    other = make_project(owner=owner, name="Graph B")
    spec = {
        "alice": (
            "Person",
            "Alice Smith",
            "Software engineer who builds graph databases.",
            {"city": "Lisbon"},
        ),
        "bob": ("Person", "Bob Jones", "Carpenter who makes wooden furniture.", {"city": "Porto"}),
        "carol": (
            "Person",
            "Carol White",
            "Chef who cooks seafood at a fish restaurant.",
            {"city": "Lisbon"},
        ),
        "dave": ("Person", "Dave Brown", "Retired airline pilot.", {"city": "Faro", "retired": True}),
        "eve": ("Person", "Eve Black", "Astronomer who studies distant galaxies.", {}),
        "acme": (
            "Company",
            "Acme Graph Systems",
            "A company selling knowledge graph databases.",
            {"country": "PT"},
        ),
        "lisbon": ("City", "Lisbon", "The capital city of Portugal.", {"country": "PT"}),
    }
    e = {
        key: make_entity(project, key, type=t, name=n, description=d, properties=p)
        for key, (t, n, d, p) in spec.items()
    }
    for src, rel, dst in [
        ("alice", "KNOWS", "bob"),
        ("bob", "KNOWS", "carol"),
        ("carol", "KNOWS", "alice"),
        ("carol", "KNOWS", "dave"),
        ("alice", "WORKS_AT", "acme"),
        ("acme", "LOCATED_IN", "lisbon"),
        ("alice", "LIVES_IN", "lisbon"),
    ]:
        make_relationship(project, e[src], rel, e[dst], since=2020)
    other_e = {
        "alice": make_entity(
            other, "alice", type="Person", name="Alice Other", description="Graph database spy."
        ),
        "mallory": make_entity(
            other, "mallory", type="Spy", name="Mallory", description="Builds graph databases."
        ),
    }
    make_relationship(other, other_e["alice"], "KNOWS", other_e["mallory"])
    if embed:
        graph_objects_embed(project_id=project.id)
        graph_objects_embed(project_id=other.id)
    return SmallGraph(project=project, other=other, e=e, other_e=other_e)


@pytest.fixture
def graph(db: None) -> SmallGraph:
    return build_small_graph()

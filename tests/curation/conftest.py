"""A small graph with a duplicate, and the members who curate it.

ada   Person "Ada Lovelace"    -KNOWS-> babbage
ada2  Person "A. Lovelace" (aliases: "Augusta Ada King")
      -KNOWS-> babbage (ada has it: collapses), -LIVES_IN-> london (re-pointed),
      -SAME_AS-> ada (between the two: dropped); engine -DESIGNED_BY-> ada2 (re-pointed)
babbage Person, london City, engine Machine
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from apps.graph_tools.models import GraphObject
from apps.projects.models import Project
from tests.factories import add_member, make_entity, make_project, make_relationship, make_user


@dataclass
class Curators:
    project: Project
    e: dict[str, GraphObject]
    owner: Client
    editor: Client
    viewer: Client

    def propose(self, client: Client, changes: list[dict[str, Any]], summary: str = "") -> Any:
        return client.post(
            f"/api/projects/{self.project.id}/curation/change-sets",
            {"changes": changes, "summary": summary},
            content_type="application/json",
        )

    def decide(self, client: Client, change_set_id: str, **decision: Any) -> Any:
        return client.post(
            f"/api/change-sets/{change_set_id}/decision",
            decision or {"approve": "all"},
            content_type="application/json",
        )


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def build_curators() -> Curators:
    owner, editor, viewer = make_user(), make_user(), make_user()
    project = make_project(owner=owner, name="Curated")
    add_member(project, editor, "editor")
    add_member(project, viewer, "viewer")
    e = {
        "ada": make_entity(project, "ada", type="Person", name="Ada Lovelace", description="Mathematician."),
        "ada2": make_entity(
            project,
            "ada2",
            type="Person",
            name="A. Lovelace",
            description="Wrote the first program.",
            properties={"aliases": ["Augusta Ada King"], "born": 1815},
        ),
        "babbage": make_entity(project, "babbage", type="Person", name="Charles Babbage"),
        "london": make_entity(project, "london", type="City", name="London"),
        "engine": make_entity(project, "engine", type="Machine", name="Analytical Engine"),
    }
    make_relationship(project, e["ada"], "KNOWS", e["babbage"])
    make_relationship(project, e["ada2"], "KNOWS", e["babbage"], since=1833)
    make_relationship(project, e["ada2"], "LIVES_IN", e["london"])
    make_relationship(project, e["ada2"], "SAME_AS", e["ada"])
    make_relationship(project, e["engine"], "DESIGNED_BY", e["ada2"])
    return Curators(
        project=project, e=e, owner=_client(owner), editor=_client(editor), viewer=_client(viewer)
    )


@pytest.fixture
def curators(db: None) -> Curators:
    return build_curators()

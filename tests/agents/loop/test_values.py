"""The relationships' values the plan step reads, once per project and graph version (issue #25)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from apps.agents.loop.values import graph_values
from tests.factories import make_entity, make_project, make_relationship

pytestmark = pytest.mark.django_db


def test_the_values_are_the_given_projects_read_once_per_graph_version():
    project, other = make_project(), make_project()
    film = make_entity(project, "film", type="Movie")
    make_relationship(project, film, "HAS_GENRE", make_entity(project, "drama", type="Genre", name="Drama"))
    make_relationship(
        other,
        make_entity(other, "theirs", type="Movie"),
        "HAS_GENRE",
        make_entity(other, "x", name="Not Mine"),
    )
    read = async_to_sync(graph_values)

    assert read(None, None) == {}  # no project: no graph to read
    first = read(project.id, 1)
    make_relationship(project, film, "HAS_TAGS", make_entity(project, "remake", type="Tag", name="remake"))
    same_version = read(project.id, 1)
    next_version = read(project.id, 2)

    assert first == same_version == {"HAS_GENRE": ("Drama",)}
    assert next_version == {"HAS_GENRE": ("Drama",), "HAS_TAGS": ("remake",)}

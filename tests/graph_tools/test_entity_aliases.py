"""Entities found by their aliases (``properties["aliases"]``, issue #26's duplicates): hybrid_search,
search_entities, query_paths' starts by name and by the names a question mentions, and extraction's entity
resolution, all through the aliases' partial GIN index (graph_tools migration 0019)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client

from apps.documents import resolution
from apps.graph_tools import search
from apps.graph_tools.models import GraphObject
from apps.graph_tools.names import ALIAS_MATCH
from tests.factories import add_member, make_entity, make_project, make_user
from tests.graph_tools.conftest import call_tool

pytestmark = pytest.mark.django_db

ALIAS = "Grand Duchy of Fenwick"


@pytest.fixture
def duchy():
    """Freedonia, known also as the Grand Duchy of Fenwick; a castle whose words overlap the alias."""
    project = make_project(name="Aliases")
    freedonia = make_entity(
        project,
        "country:freedonia",
        type="Country",
        name="Freedonia",
        properties={"aliases": [ALIAS, "Fenwick"]},
    )
    castle = make_entity(
        project, "castle:fenwick", type="Castle", name="Fenwick Castle", description="A castle in the duchy."
    )
    make_entity(project, "country:sylvania", type="Country", name="Sylvania")
    return {"project": project, "freedonia": freedonia, "castle": castle}


def names(results):
    return [r["name"] for r in results]


def test_hybrid_search_finds_an_entity_by_its_alias_before_entities_sharing_some_of_its_words(duchy):
    project = duchy["project"]

    by_alias = search.hybrid_search(project_id=project.id, embedder=None, query="grand duchy of fenwick")
    in_a_question = search.hybrid_search(
        project_id=project.id, embedder=None, query=f"Who rules the {ALIAS}?"
    )
    by_the_tool = call_tool(project, "hybrid_search", query=ALIAS)["results"]

    assert names(by_alias)[0] == "Freedonia"
    assert "Fenwick Castle" in names(by_alias)
    assert names(in_a_question)[0] == "Freedonia"
    assert names(by_the_tool)[0] == "Freedonia"


def test_hybrid_search_does_not_find_an_entity_by_a_name_it_is_not_known_by(duchy):
    results = search.hybrid_search(
        project_id=duchy["project"].id, embedder=None, query="Grand Duchy of Sylvania"
    )

    assert "Freedonia" not in names(results)


def test_search_entities_finds_an_entity_by_its_alias_over_rest_and_as_a_tool_call(duchy):
    project = duchy["project"]
    member = make_user()
    add_member(project, member)
    client = Client()
    client.force_login(member)

    response = client.post(
        f"/api/projects/{project.id}/graph/tools/search_entities",
        {"query": "grand duchy of fenwick"},
        content_type="application/json",
    )
    in_a_phrase = call_tool(project, "search_entities", query=f"the {ALIAS} castles", type="Country")
    shorter_alias = call_tool(project, "search_entities", query="Fenwick")["results"]

    assert response.status_code == 200
    assert names(response.json()["results"]) == ["Freedonia"]
    assert names(in_a_phrase["results"]) == ["Freedonia"]
    # The whole query is an alias of Freedonia and a word of the castle's name: the alias first.
    assert names(shorter_alias) == ["Freedonia", "Fenwick Castle"]


def test_search_entities_does_not_find_an_entity_by_a_name_it_is_not_known_by(duchy):
    results = call_tool(duchy["project"], "search_entities", query="Grand Duchy of Sylvania")["results"]

    assert "Freedonia" not in names(results)


def test_query_paths_starts_at_an_entity_named_by_its_alias_or_mentioned_by_it(duchy):
    project = duchy["project"]

    by_name = call_tool(project, "query_paths", start=[{"name": "grand duchy of fenwick"}])
    mentioned = call_tool(project, "query_paths", start=[{"mentioned_in": f"What borders the {ALIAS}?"}])
    by_own_name = call_tool(project, "query_paths", start=[{"name": "Fenwick Castle"}])

    assert [s["name"] for s in by_name["start"]] == ["Freedonia"]
    # The longest name the question holds wins: the whole alias, not "Fenwick" inside it.
    assert [s["name"] for s in mentioned["start"]] == ["Freedonia"]
    assert [s["name"] for s in by_own_name["start"]] == ["Fenwick Castle"]


def test_extraction_links_a_mention_of_an_alias_to_its_entity(duchy):
    action, evidence = resolution.entity_match(
        project_id=duchy["project"].id, name=f"the {ALIAS}", type_="Country"
    )

    assert action == "link"
    assert evidence["method"] == "alias" and evidence["entity"]["name"] == "Freedonia"


def test_the_alias_lookup_is_served_by_the_aliases_index_in_a_project_of_many_entities(duchy):
    project = duchy["project"]
    GraphObject.objects.bulk_create(
        GraphObject(project=project, key=f"town:{n}", type="Town", name=f"Town {n}") for n in range(3000)
    )
    sql = f"""EXPLAIN SELECT o.id FROM kb.graph_objects o
              WHERE o.project_id = %(project)s AND {ALIAS_MATCH.format(names="%(names)s")}"""

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE kb.graph_objects")
        cursor.execute(sql, {"project": project.id, "names": ["fenwick"]})
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert "graph_obj_aliases" in plan, plan

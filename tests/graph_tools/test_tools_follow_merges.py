"""The read tools given the id or key of an entity merged into another (an old answer's citation, an
agent's earlier result) answer with the entity it was merged into and say so (``merged_from``), as
REST's ``GET …/graph/entities/{idOrKey}`` does (#51)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from apps.graph_tools.merges import MergeEntitiesArgs
from apps.graph_tools.models import ChangeAuthority, GraphObject
from apps.graph_tools.registry import WriteAuthorization
from apps.graph_tools.writes import write_apply
from apps.projects.models import Project
from tests.factories import make_entity, make_project, make_relationship
from tests.graph_tools.conftest import call_tool

pytestmark = pytest.mark.django_db


@dataclass
class Merged:
    project: Project
    ada: GraphObject
    ada2: GraphObject


def merge(project: Project, keep: str, lose: str) -> None:
    write_apply(
        project_id=project.id,
        tool_name="merge_entities",
        args=MergeEntitiesArgs(keep=keep, merge=lose),
        authorization=WriteAuthorization(via=ChangeAuthority.CURATION),
    )


@pytest.fixture
def merged(db: None) -> Merged:
    """ada2 merged into ada; ada2's LIVES_IN london now ada's."""
    project = make_project()
    ada = make_entity(project, "ada", type="Person", name="Ada Lovelace")
    ada2 = make_entity(project, "ada2", type="Person", name="A. Lovelace")
    london = make_entity(project, "london", type="City", name="London")
    make_relationship(project, ada2, "LIVES_IN", london)
    merge(project, "ada", "ada2")
    return Merged(project=project, ada=ada, ada2=ada2)


@pytest.mark.parametrize("ref", ["ada2", "id"])
def test_get_entity_edges_of_a_merged_entity_answers_the_winner_with_merged_from(merged: Merged, ref: str):
    ref = str(merged.ada2.id) if ref == "id" else ref

    result = call_tool(merged.project, "get_entity_edges", entity_id=ref)

    assert result["entity"]["id"] == str(merged.ada.id)
    assert result["merged_from"] == ref
    assert [(e["type"], e["other"]["key"]) for e in result["edges"]] == [("LIVES_IN", "london")]


def test_a_live_entity_has_no_merged_from(merged: Merged):
    result = call_tool(merged.project, "get_entity_edges", entity_id="ada")

    assert "merged_from" not in result


def test_traverse_graph_from_a_merged_entity_starts_at_the_winner(merged: Merged):
    result = call_tool(merged.project, "traverse_graph", start_entity_id=str(merged.ada2.id), max_depth=1)

    assert {n["key"] for n in result["nodes"]} == {"ada", "london"}
    assert result["merged_from"] == str(merged.ada2.id)


def test_find_similar_to_a_merged_entity_is_similar_to_the_winner(merged: Merged):
    result = call_tool(merged.project, "find_similar", entity_id="ada2")

    assert result["merged_from"] == "ada2"
    assert str(merged.ada.id) not in {r["id"] for r in result["results"]}


@pytest.mark.parametrize("start", ["ada2", {"key": "ada2"}])
def test_query_paths_seeded_by_a_merged_key_starts_at_the_winner(merged: Merged, start: object):
    result = call_tool(
        merged.project, "query_paths", start=[start], hops=[{"relationship": "LIVES_IN", "direction": "out"}]
    )

    assert [s["key"] for s in result["start"]] == ["ada"]
    assert result["start"][0]["merged_from"] == "ada2"
    assert result["not_found"] == []
    assert [r["key"] for r in result["results"]] == ["london"]


def test_query_paths_seeded_by_a_merged_id_starts_at_the_winner(merged: Merged):
    result = call_tool(merged.project, "query_paths", start=[str(merged.ada2.id)], hops=[])

    assert [(r["key"], r["path"][0]["entity"]["key"]) for r in result["results"]] == [("ada", "ada")]
    assert result["start"][0]["merged_from"] == str(merged.ada2.id)


def test_a_merge_of_the_winner_is_followed_too(merged: Merged):
    make_entity(merged.project, "augusta", type="Person", name="Augusta Ada King")
    merge(merged.project, "augusta", "ada")

    result = call_tool(merged.project, "get_entity_edges", entity_id="ada2")

    assert result["entity"]["key"] == "augusta" and result["merged_from"] == "ada2"


def test_an_unknown_ref_is_still_entity_not_found(merged: Merged):
    from apps.graph_tools.errors import EntityNotFound

    with pytest.raises(EntityNotFound):
        call_tool(merged.project, "get_entity_edges", entity_id="nobody")

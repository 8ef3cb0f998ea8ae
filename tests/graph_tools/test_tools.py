"""The ten graph tools of PROTOCOL §6 against hand-computed answers on the small graph (conftest)."""

from __future__ import annotations

from typing import Any

import pytest

from apps.graph_tools.errors import EntityNotFound
from tests.factories import make_entity, make_relationship
from tests.graph_tools.conftest import SmallGraph, call_tool

ENTITY_KEYS = {"id", "key", "type", "name"}


def keys(results: list[dict[str, Any]]) -> list[str]:
    return [r["key"] for r in results]


def assert_entities_of(graph: SmallGraph, entities: list[dict[str, Any]]) -> None:
    own_ids = {str(o.id) for o in graph.e.values()}
    for entity in entities:
        assert ENTITY_KEYS <= entity.keys()
        assert isinstance(entity["id"], str)
        assert entity["id"] in own_ids


# get_entity_edges


def test_get_entity_edges_both_directions_sorted_by_type_direction_name(graph: SmallGraph):
    result = graph.call("get_entity_edges", entity_id="alice")

    assert result["entity"]["key"] == "alice"
    assert result["entity"]["properties"] == {"city": "Lisbon"}
    assert [(e["type"], e["direction"], e["other"]["key"]) for e in result["edges"]] == [
        ("KNOWS", "in", "carol"),
        ("KNOWS", "out", "bob"),
        ("LIVES_IN", "out", "lisbon"),
        ("WORKS_AT", "out", "acme"),
    ]
    edge = result["edges"][1]
    assert set(edge) == {"id", "type", "direction", "other", "properties"}
    assert edge["properties"] == {"since": 2020}
    assert_entities_of(graph, [result["entity"]] + [e["other"] for e in result["edges"]])


def test_get_entity_edges_out_only_and_in_only(graph: SmallGraph):
    out = graph.call("get_entity_edges", entity_id="alice", direction="out")
    inc = graph.call("get_entity_edges", entity_id="alice", direction="in")

    assert [e["other"]["key"] for e in out["edges"]] == ["bob", "lisbon", "acme"]
    assert {e["direction"] for e in out["edges"]} == {"out"}
    assert [(e["other"]["key"], e["direction"]) for e in inc["edges"]] == [("carol", "in")]


def test_get_entity_edges_by_id_with_type_filter_and_limit(graph: SmallGraph):
    result = graph.call(
        "get_entity_edges", entity_id=str(graph.e["carol"].id), relationship_type="KNOWS", limit=2
    )

    assert [(e["direction"], e["other"]["key"]) for e in result["edges"]] == [("in", "bob"), ("out", "alice")]


def test_get_entity_edges_of_an_isolated_entity_is_empty(graph: SmallGraph):
    assert graph.call("get_entity_edges", entity_id="eve")["edges"] == []


def test_a_self_loop_appears_once(graph: SmallGraph):
    make_relationship(graph.project, graph.e["eve"], "OBSERVES", graph.e["eve"])

    edges = graph.call("get_entity_edges", entity_id="eve")["edges"]

    assert [(e["type"], e["direction"], e["other"]["key"]) for e in edges] == [("OBSERVES", "out", "eve")]


def test_unknown_entity_is_a_tool_error_not_a_crash(graph: SmallGraph):
    with pytest.raises(EntityNotFound) as exc:
        graph.call("get_entity_edges", entity_id="nobody")

    assert exc.value.status == 404
    assert "nobody" in exc.value.message


# traverse_graph


def nodes_by_depth(result: dict[str, Any]) -> dict[str, int]:
    return {n["key"]: n["depth"] for n in result["nodes"]}


def test_traverse_outgoing_depth_one_returns_neighbours_and_edges_among_them(graph: SmallGraph):
    result = graph.call("traverse_graph", start_entity_id="alice", max_depth=1, direction="out")

    assert nodes_by_depth(result) == {"alice": 0, "acme": 1, "bob": 1, "lisbon": 1}
    assert result["truncated"] is False
    pairs = {
        (graph_key(graph, e["src_id"]), e["type"], graph_key(graph, e["dst_id"])) for e in result["edges"]
    }
    assert pairs == {
        ("alice", "KNOWS", "bob"),
        ("alice", "WORKS_AT", "acme"),
        ("alice", "LIVES_IN", "lisbon"),
        ("acme", "LOCATED_IN", "lisbon"),
    }
    assert set(result["edges"][0]) == {"id", "type", "src_id", "dst_id"}


def graph_key(graph: SmallGraph, entity_id: str) -> str:
    return next(k for k, o in graph.e.items() if str(o.id) == entity_id)


def test_traverse_outgoing_depth_three_walks_the_cycle_once(graph: SmallGraph):
    result = graph.call("traverse_graph", start_entity_id="alice", max_depth=3, direction="out")

    assert nodes_by_depth(result) == {"alice": 0, "acme": 1, "bob": 1, "lisbon": 1, "carol": 2, "dave": 3}
    assert [n["depth"] for n in result["nodes"]] == sorted(n["depth"] for n in result["nodes"])


def test_traverse_incoming_follows_edges_backwards_and_stops_at_the_cycle(graph: SmallGraph):
    result = graph.call("traverse_graph", start_entity_id="alice", max_depth=5, direction="in")

    assert nodes_by_depth(result) == {"alice": 0, "carol": 1, "bob": 2}
    assert result["truncated"] is False


def test_traverse_both_directions_depth_one(graph: SmallGraph):
    result = graph.call("traverse_graph", start_entity_id="alice", max_depth=1)

    assert nodes_by_depth(result) == {"alice": 0, "acme": 1, "bob": 1, "carol": 1, "lisbon": 1}


def test_traverse_follows_only_the_given_relationship_types(graph: SmallGraph):
    result = graph.call(
        "traverse_graph", start_entity_id="alice", max_depth=5, direction="out", relationship_types=["KNOWS"]
    )

    assert nodes_by_depth(result) == {"alice": 0, "bob": 1, "carol": 2, "dave": 3}
    assert {e["type"] for e in result["edges"]} == {"KNOWS"}


def test_traverse_node_limit_sets_truncated_and_keeps_the_nearest(graph: SmallGraph):
    result = graph.call("traverse_graph", start_entity_id="alice", max_depth=2, direction="out", limit=3)

    assert [n["key"] for n in result["nodes"]] == ["alice", "acme", "bob"]
    assert result["truncated"] is True
    assert {e["type"] for e in result["edges"]} == {"KNOWS", "WORKS_AT"}


def test_traverse_exactly_at_the_limit_is_not_truncated(graph: SmallGraph):
    result = graph.call("traverse_graph", start_entity_id="alice", max_depth=5, direction="in", limit=3)

    assert len(result["nodes"]) == 3
    assert result["truncated"] is False


def test_traverse_from_an_isolated_entity_returns_only_it(graph: SmallGraph):
    result = graph.call("traverse_graph", start_entity_id=str(graph.e["eve"].id), max_depth=5)

    assert nodes_by_depth(result) == {"eve": 0}
    assert result["edges"] == []


# list_entity_types, list_relationships, schema_version


def test_list_entity_types_counts_by_type(graph: SmallGraph):
    assert graph.call("list_entity_types") == {
        "types": [
            {"type": "Person", "count": 5},
            {"type": "City", "count": 1},
            {"type": "Company", "count": 1},
        ]
    }


def test_list_relationships_with_end_types(graph: SmallGraph):
    result = graph.call("list_relationships")

    assert result == {
        "relationship_types": [
            {"type": "KNOWS", "count": 4, "source_types": ["Person"], "target_types": ["Person"]},
            {"type": "LIVES_IN", "count": 1, "source_types": ["Person"], "target_types": ["City"]},
            {"type": "LOCATED_IN", "count": 1, "source_types": ["Company"], "target_types": ["City"]},
            {"type": "WORKS_AT", "count": 1, "source_types": ["Person"], "target_types": ["Company"]},
        ]
    }


def test_list_relationships_filters_by_entity_type_and_relationship_type(graph: SmallGraph):
    by_city = graph.call("list_relationships", entity_type="City")["relationship_types"]
    knows = graph.call("list_relationships", relationship_type="KNOWS")["relationship_types"]
    limited = graph.call("list_relationships", limit=1)["relationship_types"]

    assert [r["type"] for r in by_city] == ["LIVES_IN", "LOCATED_IN"]
    assert [(r["type"], r["count"]) for r in knows] == [("KNOWS", 4)]
    assert [r["type"] for r in limited] == ["KNOWS"]


def test_schema_version_lists_types_and_changes_only_when_the_type_sets_change(graph: SmallGraph):
    before = graph.call("schema_version")

    make_entity(graph.project, "frank", type="Person")
    same_types = graph.call("schema_version")
    make_entity(graph.project, "porto", type="Town")
    new_entity_type = graph.call("schema_version")
    make_relationship(graph.project, graph.e["bob"], "BORN_IN", graph.e["lisbon"])
    new_relationship_type = graph.call("schema_version")

    assert set(before) == {
        "version",
        "entity_types",
        "relationship_types",
        "updated_at",
        "graph_version",
        "ontology",
    }
    assert before["ontology"] is None
    assert before["entity_types"] == ["City", "Company", "Person"]
    assert before["relationship_types"] == ["KNOWS", "LIVES_IN", "LOCATED_IN", "WORKS_AT"]
    assert same_types["version"] == before["version"]
    assert same_types["updated_at"] >= before["updated_at"]
    assert len({before["version"], new_entity_type["version"], new_relationship_type["version"]}) == 3


def test_schema_version_of_an_empty_graph(db: None):
    from tests.factories import make_project

    result = call_tool(make_project(), "schema_version")

    assert result["entity_types"] == [] and result["relationship_types"] == []
    assert result["updated_at"] is None


# query_entities


def test_query_entities_by_type_is_paged_with_total(graph: SmallGraph):
    first = graph.call("query_entities", type="Person", limit=2)
    second = graph.call("query_entities", type="Person", limit=2, offset=2)
    beyond = graph.call("query_entities", type="Person", limit=2, offset=10)

    assert (keys(first["results"]), first["total"]) == (["alice", "bob"], 5)
    assert (keys(second["results"]), second["total"]) == (["carol", "dave"], 5)
    assert (beyond["results"], beyond["total"]) == ([], 5)
    assert first["results"][0]["properties"] == {"city": "Lisbon"}


def test_query_entities_by_exact_properties(graph: SmallGraph):
    lisbon = graph.call("query_entities", properties={"city": "Lisbon"})
    retired = graph.call("query_entities", type="Person", properties={"retired": True})
    none = graph.call("query_entities", properties={"city": "Madrid"})

    assert keys(lisbon["results"]) == ["alice", "carol"]
    assert keys(retired["results"]) == ["dave"]
    assert none == {"results": [], "total": 0}


# search_entities, hybrid_search, semantic_search, find_similar


def test_search_entities_matches_name_and_description_words(graph: SmallGraph):
    result = graph.call("search_entities", query="graph")

    assert keys(result["results"]) == ["acme", "alice"]
    assert_entities_of(graph, result["results"])


def test_search_entities_type_filter_substring_and_no_match(graph: SmallGraph):
    assert keys(graph.call("search_entities", query="graph", type="Person")["results"]) == ["alice"]
    assert keys(graph.call("search_entities", query="Lisb")["results"]) == ["lisbon"]
    assert graph.call("search_entities", query="zebra") == {"results": []}


def test_hybrid_search_ranks_the_named_entity_first_with_scores(graph: SmallGraph):
    result = graph.call("hybrid_search", query="Alice")

    results = result["results"]
    assert results[0]["key"] == "alice"
    assert all(isinstance(r["score"], float) for r in results)
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    assert_entities_of(graph, results)


def test_hybrid_search_finds_a_misspelt_name(graph: SmallGraph):
    results = graph.call("hybrid_search", query="Alise Smith", limit=3)["results"]

    assert results[0]["key"] == "alice"


def test_hybrid_search_fuses_meaning_when_no_word_matches(graph: SmallGraph):
    results = graph.call("hybrid_search", query="who prepares fish dishes?", limit=3)["results"]

    assert results[0]["key"] == "carol"


def test_hybrid_search_types_filter_and_limit(graph: SmallGraph):
    cities = graph.call("hybrid_search", query="graph databases", types=["City", "Company"])["results"]
    one = graph.call("hybrid_search", query="graph databases", limit=1)["results"]

    assert set(keys(cities)) <= {"lisbon", "acme"}
    assert keys(cities)[0] == "acme"
    assert len(one) == 1


def test_semantic_search_finds_by_meaning(graph: SmallGraph):
    results = graph.call("semantic_search", query="woodworking and furniture making")["results"]

    assert results[0]["key"] == "bob"
    assert len(results) == 7
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    assert_entities_of(graph, results)


def test_semantic_search_type_filter(graph: SmallGraph):
    results = graph.call("semantic_search", query="a place to live", type="City")["results"]

    assert keys(results) == ["lisbon"]


def test_find_similar_never_returns_the_entity_itself(graph: SmallGraph):
    results = graph.call("find_similar", entity_id="alice", limit=10)["results"]

    assert "alice" not in keys(results)
    assert len(results) == 6
    assert_entities_of(graph, results)


def test_find_similar_by_id_respects_limit(graph: SmallGraph):
    results = graph.call("find_similar", entity_id=str(graph.e["acme"].id), limit=2)["results"]

    assert len(results) == 2
    assert "acme" not in keys(results)


def test_find_similar_embeds_an_entity_without_a_vector_on_the_fly(graph: SmallGraph):
    make_entity(
        graph.project, "gina", type="Person", name="Gina", description="Sells wooden chairs and tables."
    )

    results = graph.call("find_similar", entity_id="gina", limit=1)["results"]

    assert keys(results) == ["bob"]


def test_vector_search_ignores_vectors_of_another_model(graph: SmallGraph):
    from apps.graph_tools.models import GraphObjectEmbedding

    GraphObjectEmbedding.objects.filter(object_id=graph.e["bob"].id).update(model="other-model:384")

    results = graph.call("semantic_search", query="woodworking and furniture making")["results"]

    assert "bob" not in keys(results)


# no cross-project leakage


def test_an_entity_of_another_project_is_not_found_by_key_or_id(graph: SmallGraph):
    for ref in ("mallory", str(graph.other_e["alice"].id), str(graph.other_e["mallory"].id)):
        for name, argument in [
            ("get_entity_edges", "entity_id"),
            ("find_similar", "entity_id"),
            ("traverse_graph", "start_entity_id"),
        ]:
            with pytest.raises(EntityNotFound):
                graph.call(name, **{argument: ref})


def test_no_tool_returns_another_projects_data(graph: SmallGraph):
    foreign = {str(o.id) for o in graph.other_e.values()} | {"Spy", "Mallory", "Alice Other"}
    calls = [
        ("hybrid_search", {"query": "graph database spy Mallory"}),
        ("search_entities", {"query": "graph"}),
        ("semantic_search", {"query": "spy who builds graph databases"}),
        ("query_entities", {"limit": 500}),
        ("find_similar", {"entity_id": "alice", "limit": 100}),
        ("get_entity_edges", {"entity_id": "alice"}),
        ("traverse_graph", {"start_entity_id": "alice", "max_depth": 5}),
        ("list_entity_types", {}),
        ("schema_version", {}),
        ("list_relationships", {}),
    ]

    for name, arguments in calls:
        text = repr(graph.call(name, **arguments))
        assert not any(f in text for f in foreign), name

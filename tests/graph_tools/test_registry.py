"""The tool registry: which tools it holds (registered at start-up), argument validation, unknown tools."""

from __future__ import annotations

import pytest

from apps.graph_tools.errors import ToolArgumentError, UnknownTool
from apps.graph_tools.registry import tool_names
from tests.graph_tools.conftest import SmallGraph, call_tool


def test_the_registry_holds_the_fourteen_read_tools_and_the_eight_write_tools():
    assert sorted(tool_names(read_only=True)) == sorted(
        [
            "hybrid_search",
            "search_entities",
            "semantic_search",
            "query_entities",
            "find_similar",
            "get_entity_edges",
            "traverse_graph",
            "list_entity_types",
            "schema_version",
            "list_relationships",
            "query_paths",
            "search_passages",
            "ontology_violations",
            "curation_queue",
        ]
    )
    assert sorted(tool_names(read_only=False)) == [
        "create_entity",
        "create_relationship",
        "delete_entity",
        "delete_relationship",
        "merge_entities",
        "unmerge_entities",
        "update_entity",
        "update_relationship",
    ]


@pytest.mark.parametrize(
    ("name", "arguments", "argument"),
    [
        ("hybrid_search", {}, "query"),
        ("hybrid_search", {"query": "   "}, "query"),
        ("hybrid_search", {"query": "x", "limit": 0}, "limit"),
        ("hybrid_search", {"query": "x", "limit": 1000}, "limit"),
        ("search_entities", {"query": "x", "colour": "red"}, "colour"),
        ("semantic_search", {"query": 42}, "query"),
        ("query_entities", {"offset": -1}, "offset"),
        ("query_entities", {"properties": "city=Lisbon"}, "properties"),
        ("find_similar", {}, "entity_id"),
        ("get_entity_edges", {"entity_id": "alice", "direction": "sideways"}, "direction"),
        ("traverse_graph", {"start_entity_id": "alice", "max_depth": 0}, "max_depth"),
        ("traverse_graph", {"start_entity_id": "alice", "max_depth": 6}, "max_depth"),
        ("traverse_graph", {"start_entity_id": "alice", "relationship_types": "KNOWS"}, "relationship_types"),
        ("list_entity_types", {"anything": 1}, "anything"),
        ("list_relationships", {"limit": "many"}, "limit"),
    ],
)
def test_invalid_arguments_are_a_tool_error_naming_the_argument(graph: SmallGraph, name, arguments, argument):
    with pytest.raises(ToolArgumentError) as exc:
        call_tool(graph.project, name, **arguments)

    assert exc.value.argument == argument
    assert argument in exc.value.message
    assert exc.value.status == 400


def test_unknown_tool_is_refused(graph: SmallGraph):
    with pytest.raises(UnknownTool):
        graph.call("drop_database")

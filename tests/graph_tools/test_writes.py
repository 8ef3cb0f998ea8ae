"""The write tools (apps/graph_tools/writes.py through the registry): each write, the graph version it
bumps, its audit row, and bad input that writes nothing and keeps the version."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connections

from apps.graph_tools.embeddings import get_embedder, pending_batch_embed
from apps.graph_tools.errors import (
    ApprovalRequired,
    EntityExists,
    EntityNotFound,
    RelationshipExists,
    RelationshipNotFound,
    ToolArgumentError,
    ToolError,
)
from apps.graph_tools.importer import graph_import
from apps.graph_tools.models import EntityTypeCount, GraphChange, GraphObject, GraphRelationship
from apps.graph_tools.registry import WriteAuthorization, tool_call
from apps.graph_tools.selectors import graph_changes_since
from apps.graph_tools.services import tool_write_preview
from apps.graph_tools.versions import graph_version_current
from tests.factories import make_user
from tests.graph_tools.conftest import SmallGraph
from tests.graph_tools.vectors import vector_models

RUN = uuid.uuid4()


@pytest.fixture
def writer(graph: SmallGraph) -> WriteAuthorization:
    return WriteAuthorization(via="policy_never", user_id=int(make_user().pk), run_id=RUN)


def write(
    graph: SmallGraph, auth: WriteAuthorization | None, tool: str, /, **arguments: Any
) -> dict[str, Any]:
    return async_to_sync(tool_call)(
        project_id=graph.project.id, name=tool, arguments=arguments, authorization=auth
    )


def version(graph: SmallGraph) -> int:
    return graph_version_current(project_id=graph.project.id)


def type_count(graph: SmallGraph, type_: str) -> int:
    row = EntityTypeCount.objects.filter(project_id=graph.project.id, type=type_).first()
    return row.count if row else 0


def test_create_entity_writes_it_searchable_embedded_counted_and_audited(
    transactional_db: None, graph: SmallGraph, writer
):
    # Committed data: the background worker embeds the entity after the commit.
    result = write(
        graph,
        writer,
        "create_entity",
        key="frank",
        type="Person",
        name="Frank Green",
        description="Beekeeper who sells honey in Berlin.",
        properties={"city": "Berlin"},
    )

    found = graph.call("search_entities", query="beekeeper honey")["results"]
    waiting = vector_models(graph.project, "frank")
    pending_batch_embed(project_id=graph.project.id)

    entity = GraphObject.objects.get(project=graph.project, key="frank")
    assert result["changed"] is True and result["graph_version"] == 1 == version(graph)
    assert result["after"]["id"] == str(entity.id)
    assert (entity.name, entity.properties) == ("Frank Green", {"city": "Berlin"})
    assert waiting == [], "the write returns at its commit, before the embedding"
    assert vector_models(graph.project, "frank") == [get_embedder().name]
    assert type_count(graph, "Person") == 6
    assert [r["key"] for r in found] == ["frank"]
    change = GraphChange.objects.get(project=graph.project)
    assert (change.action, change.entity_id, change.version) == ("create_entity", entity.id, 1)
    assert (change.user_id, change.authority, change.run_id, change.before) == (
        writer.user_id,
        "policy_never",
        RUN,
        None,
    )
    assert change.after["name"] == "Frank Green"


def test_update_entity_sets_and_removes_properties_and_records_before_and_after(graph: SmallGraph, writer):
    result = write(
        graph,
        writer,
        "update_entity",
        entity_id="dave",
        name="Dave Brown Sr.",
        properties={"city": "Berlin", "retired": None, "team": "Berlin"},
    )

    dave = GraphObject.objects.get(id=graph.e["dave"].id)
    assert dave.name == "Dave Brown Sr."
    assert dave.properties == {"city": "Berlin", "team": "Berlin"}
    assert result["graph_version"] == 1
    assert [c["field"] for c in result["changes"]] == [
        "name",
        "properties.city",
        "properties.retired",
        "properties.team",
    ]
    change = GraphChange.objects.get(project=graph.project)
    assert change.action == "update_entity"
    assert change.before["properties"] == {"city": "Faro", "retired": True}
    assert change.after["properties"] == {"city": "Berlin", "team": "Berlin"}
    assert graph.call("search_entities", query="Dave Brown Sr.")["results"][0]["key"] == "dave"


def test_update_entity_with_the_values_it_has_writes_nothing_and_keeps_the_version(graph: SmallGraph, writer):
    result = write(
        graph, writer, "update_entity", entity_id="dave", name="Dave Brown", properties={"city": "Faro"}
    )

    assert result["changed"] is False
    assert result["graph_version"] == 0 == version(graph)
    assert not GraphChange.objects.exists()


def test_delete_entity_removes_it_and_its_relationships_and_audits_each(graph: SmallGraph, writer):
    alice = graph.e["alice"]

    result = write(graph, writer, "delete_entity", entity_id=str(alice.id))

    assert not GraphObject.objects.filter(id=alice.id).exists()
    assert not GraphRelationship.objects.filter(src=alice).exists()
    assert "and its 4 relationships" in result["summary"]
    assert type_count(graph, "Person") == 4
    changes = GraphChange.objects.filter(project=graph.project, version=1)
    assert sorted(c.action for c in changes) == ["delete_entity"] + ["delete_relationship"] * 4
    assert changes.get(action="delete_entity").before["key"] == "alice"


def test_create_and_delete_relationship_bump_the_version_once_each(graph: SmallGraph, writer):
    created = write(
        graph, writer, "create_relationship", src="eve", type="KNOWS", dst="dave", properties={"since": 2024}
    )
    deleted = write(graph, writer, "delete_relationship", src="alice", type="WORKS_AT", dst="acme")

    assert (created["graph_version"], deleted["graph_version"]) == (1, 2)
    assert GraphRelationship.objects.filter(src=graph.e["eve"], type="KNOWS", dst=graph.e["dave"]).exists()
    assert not GraphRelationship.objects.filter(src=graph.e["alice"], type="WORKS_AT").exists()
    first, second = GraphChange.objects.order_by("version")
    assert (first.action, first.src_id, first.dst_id) == (
        "create_relationship",
        graph.e["eve"].id,
        graph.e["dave"].id,
    )
    assert (second.action, second.before["properties"]) == ("delete_relationship", {"since": 2020})


def test_update_relationship_sets_and_removes_its_properties_audited_with_before_and_after(
    graph: SmallGraph, writer
):
    result = write(
        graph,
        writer,
        "update_relationship",
        src="alice",
        type="WORKS_AT",
        dst="acme",
        properties={"since": 2021, "role": "engineer"},
    )
    again = write(
        graph,
        writer,
        "update_relationship",
        src="alice",
        type="WORKS_AT",
        dst="acme",
        properties={"since": None},
    )

    rel = GraphRelationship.objects.get(src=graph.e["alice"], type="WORKS_AT", dst=graph.e["acme"])
    assert rel.properties == {"role": "engineer"}
    assert (result["graph_version"], again["graph_version"]) == (1, 2)
    assert [c["field"] for c in result["changes"]] == ["properties.since", "properties.role"]
    first, second = GraphChange.objects.order_by("version")
    assert (first.action, first.relationship_id, first.src_id) == (
        "update_relationship",
        rel.id,
        graph.e["alice"].id,
    )
    assert (first.before["properties"], first.after["properties"]) == (
        {"since": 2020},
        {"since": 2021, "role": "engineer"},
    )
    assert second.after["properties"] == {"role": "engineer"}


def test_update_relationship_with_the_values_it_has_writes_nothing(graph: SmallGraph, writer):
    result = write(
        graph,
        writer,
        "update_relationship",
        src="alice",
        type="WORKS_AT",
        dst="acme",
        properties={"since": 2020},
    )

    assert result["changed"] is False and version(graph) == 0
    assert not GraphChange.objects.exists()


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("create_entity", {"key": "x", "type": "T", "name": "X", "colour": "red"}, ToolArgumentError),
        ("create_entity", {"key": "alice", "type": "Person", "name": "Another Alice"}, EntityExists),
        ("update_entity", {"entity_id": "alice"}, ToolError),
        ("update_entity", {"entity_id": "mallory", "name": "Mallory"}, EntityNotFound),
        ("delete_entity", {"entity_id": "nobody"}, EntityNotFound),
        ("create_relationship", {"src": "alice", "type": "KNOWS", "dst": "nobody"}, EntityNotFound),
        ("create_relationship", {"src": "alice", "type": "KNOWS", "dst": "mallory"}, EntityNotFound),
        ("create_relationship", {"src": "alice", "type": "KNOWS", "dst": "bob"}, RelationshipExists),
        ("delete_relationship", {"src": "bob", "type": "KNOWS", "dst": "alice"}, RelationshipNotFound),
        (
            "update_relationship",
            {"src": "bob", "type": "KNOWS", "dst": "alice", "properties": {}},
            RelationshipNotFound,
        ),
        ("update_relationship", {"src": "alice", "type": "WORKS_AT", "dst": "acme"}, ToolArgumentError),
    ],
)
def test_bad_write_is_a_clear_tool_error_writes_nothing_and_keeps_the_version(
    graph: SmallGraph, writer, name: str, arguments: dict[str, Any], error: type[Exception]
):
    entities, relationships = GraphObject.objects.count(), GraphRelationship.objects.count()

    with pytest.raises(error) as raised:
        write(graph, writer, name, **arguments)

    assert str(raised.value)
    assert (GraphObject.objects.count(), GraphRelationship.objects.count()) == (entities, relationships)
    assert version(graph) == 0
    assert not GraphChange.objects.exists()


def test_another_projects_entity_by_id_is_not_found(graph: SmallGraph, writer):
    with pytest.raises(EntityNotFound):
        write(graph, writer, "delete_entity", entity_id=str(graph.other_e["alice"].id))

    assert GraphObject.objects.filter(id=graph.other_e["alice"].id).exists()


def test_write_tool_without_an_authorization_answers_approval_required_and_writes_nothing(graph: SmallGraph):
    with pytest.raises(ApprovalRequired) as raised:
        write(graph, None, "delete_entity", entity_id="alice")

    assert raised.value.code == "approval_required"
    assert GraphObject.objects.filter(id=graph.e["alice"].id).exists()
    assert version(graph) == 0


def test_preview_gives_the_diff_and_writes_nothing(graph: SmallGraph):
    diff = tool_write_preview(
        project_id=graph.project.id,
        name="update_entity",
        arguments={"entity_id": "bob", "description": "Joiner."},
    )

    assert diff["summary"] == 'Update entity Person "Bob Jones" (bob): description'
    assert diff["changes"] == [
        {"field": "description", "before": "Carpenter who makes wooden furniture.", "after": "Joiner."}
    ]
    assert (
        GraphObject.objects.get(id=graph.e["bob"].id).description == "Carpenter who makes wooden furniture."
    )
    assert version(graph) == 0


def test_preview_of_a_read_tool_is_refused(graph: SmallGraph):
    with pytest.raises(ToolError, match="not a write tool"):
        tool_write_preview(project_id=graph.project.id, name="hybrid_search", arguments={"query": "x"})


def test_import_bumps_the_version_once_and_records_each_record(graph: SmallGraph):
    lines = [
        '{"kind": "entity", "key": "gina", "type": "Person", "name": "Gina"}',
        '{"kind": "entity", "key": "bob", "type": "Person", "name": "Bob Jones"}',
        '{"kind": "relationship", "src": "gina", "type": "KNOWS", "dst": "bob"}',
    ]

    result = graph_import(project=graph.project, lines=lines)
    empty = graph_import(project=graph.project, lines=["", "  "])

    assert result.graph_version == 1 == version(graph)
    assert empty.graph_version is None
    actions = sorted(GraphChange.objects.filter(version=1).values_list("action", flat=True))
    assert actions == ["import_entity", "import_entity", "import_relationship"]


def test_changes_since_a_version_name_only_the_given_entities_and_their_edges(graph: SmallGraph, writer):
    write(graph, writer, "update_entity", entity_id="eve", description="Astronomer.")
    write(graph, writer, "create_relationship", src="carol", type="KNOWS", dst="bob")
    write(graph, writer, "update_entity", entity_id="acme", name="Acme")

    changes = graph_changes_since(
        project_id=graph.project.id, version=1, entity_ids=[graph.e["bob"].id, graph.e["eve"].id]
    )
    unrelated = graph_changes_since(project_id=graph.project.id, version=0, entity_ids=[graph.e["lisbon"].id])

    assert [(c.version, c.action) for c in changes] == [(2, "create_relationship")]
    assert unrelated == []


def test_concurrent_writes_each_get_their_own_version(transactional_db: None, graph: SmallGraph, writer):
    # Two writers released together: the version row and the project's write turn serialise them.
    barrier = threading.Barrier(2)
    results: dict[str, int] = {}

    def create(key: str) -> None:
        try:
            barrier.wait()
            results[key] = write(graph, writer, "create_entity", key=key, type="Person", name=key)[
                "graph_version"
            ]
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create, args=(k,)) for k in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results.values()) == [1, 2]
    assert sorted(GraphChange.objects.values_list("version", flat=True)) == [1, 2]
    assert version(graph) == 2


def test_a_write_called_again_with_its_idempotency_key_answers_the_first_result_and_writes_nothing(
    graph: SmallGraph,
):
    # What a resumed agent run does when its process died after the write, before storing its result.
    keyed = WriteAuthorization(
        via="policy_never", user_id=int(make_user().pk), run_id=RUN, idempotency_key=f"run:{RUN}:call-7"
    )
    first = write(graph, keyed, "create_entity", key="gina", type="Person", name="Gina")
    again = write(graph, keyed, "create_entity", key="gina", type="Person", name="Gina")

    assert again == first and first["changed"] is True
    assert GraphObject.objects.filter(project=graph.project, key="gina").count() == 1
    assert GraphChange.objects.filter(project=graph.project, action="create_entity").count() == 1
    assert version(graph) == first["graph_version"]
    with pytest.raises(EntityExists):  # another call (another key) is a write of its own
        write(
            graph,
            writer_with_key(f"run:{RUN}:call-8"),
            "create_entity",
            key="gina",
            type="Person",
            name="Gina",
        )


def writer_with_key(key: str) -> WriteAuthorization:
    return WriteAuthorization(
        via="policy_never", user_id=int(make_user().pk), run_id=RUN, idempotency_key=key
    )

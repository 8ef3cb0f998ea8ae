"""The whole-graph tools read per-project type counts kept by triggers (migration 0005).

Each test changes the small graph (conftest) through one way of writing it and checks that
list_entity_types, list_relationships and schema_version answer as a full scan would.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.db import connection, transaction

from apps.graph_tools.importer import graph_import
from apps.graph_tools.models import EntityTypeCount, GraphObject, GraphRelationship, RelationshipTypeCount
from tests.graph_tools.conftest import SmallGraph, build_small_graph


def summary(graph: SmallGraph) -> dict[str, Any]:
    return {
        "types": graph.call("list_entity_types")["types"],
        "relationships": graph.call("list_relationships")["relationship_types"],
        "schema": graph.call("schema_version"),
    }


def scanned(graph: SmallGraph) -> dict[str, Any]:
    """The same answers computed from the graph tables themselves."""
    objects = GraphObject.objects.filter(project=graph.project)
    counts: dict[str, int] = {}
    for t in objects.values_list("type", flat=True):
        counts[t] = counts.get(t, 0) + 1
    rels: dict[str, dict[str, Any]] = {}
    for r in GraphRelationship.objects.filter(project=graph.project).select_related("src", "dst"):
        entry = rels.setdefault(
            r.type, {"type": r.type, "count": 0, "source_types": set(), "target_types": set()}
        )
        entry["count"] += 1
        entry["source_types"].add(r.src.type)
        entry["target_types"].add(r.dst.type)
    return {
        "types": [{"type": t, "count": n} for t, n in sorted(counts.items(), key=lambda i: (-i[1], i[0]))],
        "relationships": [
            {**e, "source_types": sorted(e["source_types"]), "target_types": sorted(e["target_types"])}
            for e in sorted(rels.values(), key=lambda e: (-e["count"], e["type"]))
        ],
        "entity_types": sorted(counts),
        "relationship_types": sorted(rels),
    }


def assert_counts_match_a_scan(graph: SmallGraph) -> dict[str, Any]:
    answer, expected = summary(graph), scanned(graph)
    assert answer["types"] == expected["types"]
    assert answer["relationships"] == expected["relationships"]
    assert answer["schema"]["entity_types"] == expected["entity_types"]
    assert answer["schema"]["relationship_types"] == expected["relationship_types"]
    return answer


def jsonl(*records: dict[str, Any]) -> list[str]:
    return [json.dumps(r) for r in records]


def test_an_import_that_retypes_an_entity_moves_its_count_and_its_relationships_end_types(graph: SmallGraph):
    before = summary(graph)

    graph_import(
        project=graph.project,
        lines=jsonl(
            {"kind": "entity", "key": "bob", "type": "Robot", "name": "Bob Jones"},
            {"kind": "entity", "key": "rex", "type": "Robot", "name": "Rex"},
            {"kind": "relationship", "type": "BUILT", "src": "rex", "dst": "bob"},
            {
                "kind": "relationship",
                "type": "KNOWS",
                "src": "alice",
                "dst": "bob",
                "properties": {"since": 1},
            },
        ),
    )

    after = assert_counts_match_a_scan(graph)
    assert {"type": "Robot", "count": 2} in after["types"]
    assert {"type": "Person", "count": 4} in after["types"]
    knows = next(r for r in after["relationships"] if r["type"] == "KNOWS")
    assert (knows["count"], knows["source_types"], knows["target_types"]) == (
        4,
        ["Person", "Robot"],
        ["Person", "Robot"],
    )
    assert after["schema"]["version"] != before["schema"]["version"]


def test_saving_and_deleting_through_the_orm_as_the_admin_does_keeps_the_counts(graph: SmallGraph):
    lisbon = graph.e["lisbon"]
    lisbon.type = "Capital"
    lisbon.save()
    graph.e["carol"].delete()  # cascades to her three KNOWS relationships
    GraphRelationship.objects.filter(project=graph.project, type="WORKS_AT").update(type="EMPLOYED_BY")
    GraphRelationship.objects.filter(project=graph.project, type="LIVES_IN").update(dst=graph.e["acme"])

    after = assert_counts_match_a_scan(graph)

    assert after["types"] == [
        {"type": "Person", "count": 4},
        {"type": "Capital", "count": 1},
        {"type": "Company", "count": 1},
    ]
    assert [(r["type"], r["count"], r["target_types"]) for r in after["relationships"]] == [
        ("EMPLOYED_BY", 1, ["Company"]),
        ("KNOWS", 1, ["Person"]),
        ("LIVES_IN", 1, ["Company"]),
        ("LOCATED_IN", 1, ["Capital"]),
    ]


def test_property_and_name_changes_leave_the_schema_version_alone(graph: SmallGraph):
    before = graph.call("schema_version")

    GraphObject.objects.filter(project=graph.project).update(name="Renamed", properties={"x": 1})
    GraphRelationship.objects.filter(project=graph.project).update(properties={"weight": 2})

    assert graph.call("schema_version")["version"] == before["version"]
    assert_counts_match_a_scan(graph)


def test_a_relationship_written_before_its_entity_counts_once_both_ends_exist(graph: SmallGraph):
    # The foreign keys are deferred, so inside a transaction the order of writes is free.
    new_id = uuid.uuid4()
    with transaction.atomic():
        GraphRelationship.objects.create(
            project=graph.project, src=graph.e["eve"], type="MENTORS", dst_id=new_id
        )
        early = graph.call("list_relationships", relationship_type="MENTORS")["relationship_types"]
        GraphObject.objects.create(id=new_id, project=graph.project, key="zoe", type="Student", name="Zoe")

    assert early == []
    assert graph.call("list_relationships", relationship_type="MENTORS")["relationship_types"] == [
        {"type": "MENTORS", "count": 1, "source_types": ["Person"], "target_types": ["Student"]}
    ]
    assert_counts_match_a_scan(graph)


def test_an_entity_deleted_before_its_relationships_stops_counting_them_at_once(graph: SmallGraph):
    with transaction.atomic(), connection.cursor() as cursor:
        # Raw SQL: the ORM always deletes the relationships first; the deferred foreign keys allow
        # the other order within a transaction.
        cursor.execute("DELETE FROM kb.graph_objects WHERE id = %s", [graph.e["dave"].id])
        during = graph.call("list_relationships", relationship_type="KNOWS")["relationship_types"]
        cursor.execute("DELETE FROM kb.graph_relationships WHERE dst_id = %s", [graph.e["dave"].id])

    assert during == [{"type": "KNOWS", "count": 3, "source_types": ["Person"], "target_types": ["Person"]}]
    assert_counts_match_a_scan(graph)


def test_deleting_a_project_removes_its_counts_and_leaves_the_other_projects(db: None):
    graph = build_small_graph(embed=False)
    other_before = EntityTypeCount.objects.filter(project_id=graph.other.id).count()

    graph.project.delete()

    assert not EntityTypeCount.objects.filter(project_id=graph.project.id).exists()
    assert not RelationshipTypeCount.objects.filter(project_id=graph.project.id).exists()
    assert EntityTypeCount.objects.filter(project_id=graph.other.id).count() == other_before == 2

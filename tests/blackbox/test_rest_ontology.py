"""A project's own ontology over REST (#51): import and its refusals, read, the setting, delete,
export, a write that breaks it refused by the graph tools route, the violations queue, and a draft
proposed by the (scripted) model from the project's documents, read, discarded and accepted. Each
test works in a project of its own: Atlas's writes must stay free for the other tests."""

from __future__ import annotations

import json

import yaml

from tests.blackbox.covers import covers
from tests.blackbox.world import GRAPH, World

ONTOLOGY = """
entity_types:
  Person: {properties: {born: integer}}
  Machine: {}
  City: {properties: {population: integer}}
relationship_types:
  WORKED_WITH: {domain: [Person], range: [Person], properties: {since: integer}}
  DESIGNED: {domain: [Person], range: [Machine]}
  LIVED_IN: {domain: [Person], range: [Machine]}
"""
IMPORT = "POST /api/projects/{project_id}/ontology/import"
ONE = "/api/projects/{project_id}/ontology"
DRAFT = "/api/projects/{project_id}/ontology/draft"
QUEUE = "GET /api/projects/{project_id}/curation/queues/ontology-violations"


def new_project(world: World, name: str, *, graph: bool = True) -> str:
    return world.new_project(name, graph=GRAPH if graph else None)


@covers(
    "POST /api/projects/{project_id}/ontology/import",
    "200",
    "400 invalid_ontology",
    "403 forbidden",
    "413 payload_too_large",
)
@covers("GET /api/projects/{project_id}/ontology", "200", "404 ontology_not_found")
@covers("PATCH /api/projects/{project_id}/ontology", "200", "404 ontology_not_found")
@covers("DELETE /api/projects/{project_id}/ontology", "204", "404 ontology_not_found")
def test_an_editor_imports_an_ontology_members_read_it_and_it_can_be_set_and_removed(world: World) -> None:
    project = new_project(world, "Ontology import")
    bob, cy = world.api("bob"), world.api("cy")
    headers = {"Content-Type": "application/yaml"}

    cy.call(f"GET {ONE}", 404, "ontology_not_found", project_id=project)
    bob.call(f"PATCH {ONE}", 404, "ontology_not_found", json={"onViolation": "flag"}, project_id=project)
    cy.call(IMPORT, 403, "forbidden", content=ONTOLOGY, headers=headers, project_id=project)
    bad = bob.call(
        IMPORT,
        400,
        "invalid_ontology",
        content="entity_types: {A: {properties: {x: when}}}",
        headers=headers,
        project_id=project,
    )
    bob.call(IMPORT, 413, "payload_too_large", content="#" * 1_000_001, headers=headers, project_id=project)
    imported = bob.call(IMPORT, 200, content=ONTOLOGY, headers=headers, project_id=project).json()
    read = cy.call(f"GET {ONE}", 200, project_id=project).json()
    flagged = bob.call(f"PATCH {ONE}", 200, json={"onViolation": "flag"}, project_id=project).json()
    bob.call(f"DELETE {ONE}", 204, project_id=project)
    bob.call(f"DELETE {ONE}", 404, "ontology_not_found", project_id=project)

    assert "unknown datatype 'when'" in bad.json()["error"]
    assert imported["ontology"]["relationship_types"]["DESIGNED"] == {
        "domain": ["Person"],
        "range": ["Machine"],
    }
    assert read == imported and read["onViolation"] == "refuse"
    assert flagged["onViolation"] == "flag"


@covers("GET /api/projects/{project_id}/ontology/export", "200")
@covers("GET /api/projects/{project_id}/curation/queues/ontology-violations", "200", "400 invalid_cursor")
def test_the_graphs_schema_exports_round_trips_and_a_write_against_the_ontology_is_refused(
    world: World,
) -> None:
    project = new_project(world, "Ontology export")
    bob = world.api("bob")

    exported = bob.call(
        "GET /api/projects/{project_id}/ontology/export", 200, params={"format": "yaml"}, project_id=project
    )
    round_trip = bob.call(
        IMPORT,
        200,
        content=exported.content,
        headers={"Content-Type": "application/yaml"},
        project_id=project,
    ).json()
    bob.call(IMPORT, 200, content=ONTOLOGY, headers={"Content-Type": "application/yaml"}, project_id=project)
    refused = bob.call(
        "POST /api/projects/{project_id}/graph/tools/{tool_name}",
        403,
        "approval_required",
        json={"src": "london", "type": "DESIGNED", "dst": "analytical-engine"},
        project_id=project,
        tool_name="create_relationship",
    )
    schema = bob.call(
        "POST /api/projects/{project_id}/graph/tools/{tool_name}",
        200,
        json={},
        project_id=project,
        tool_name="schema_version",
    ).json()
    queue = bob.call(QUEUE, 200, params={"limit": 1}, project_id=project).json()
    bob.call(QUEUE, 400, "invalid_cursor", params={"cursor": "nonsense"}, project_id=project)

    document = yaml.safe_load(exported.text)
    assert document["relationship_types"]["LIVED_IN"] == {"domain": ["Person"], "range": ["City"]}
    assert round_trip["ontology"] == document
    assert "approval" in refused.json()["error"]  # direct writes are off: the plan is not even made
    assert schema["ontology"]["relationship_types"]["LIVED_IN"]["range"] == ["Machine"]
    assert queue["count"] == 1 and queue["nextCursor"] is None
    assert queue["items"][0]["violations"] == [
        {"rule": "range", "message": "LIVED_IN to a City: its range is Machine"}
    ]


@covers(
    "POST /api/projects/{project_id}/ontology/draft",
    "201",
    "409 ontology_exists",
    "409 no_documents",
    "502 draft_failed",
)
@covers("GET /api/projects/{project_id}/ontology/draft", "200", "404 ontology_not_found")
@covers("DELETE /api/projects/{project_id}/ontology/draft", "204", "404 ontology_not_found")
@covers("POST /api/projects/{project_id}/ontology/draft/accept", "200", "404 ontology_not_found")
def test_a_draft_proposed_from_the_documents_is_read_discarded_and_accepted(world: World) -> None:
    project = new_project(world, "Ontology draft", graph=False)
    failing = new_project(world, "Ontology draft fails", graph=False)
    bob = world.api("bob")
    answer = {
        "entity_types": [{"name": "Person", "description": "A human"}, {"name": "City", "description": ""}],
        "relationship_types": [{"name": "lived in", "domain": "Person", "range": "City"}],
        "properties": [{"type": "Person", "name": "born", "datatype": "integer"}],
    }
    text = f"Ada Lovelace lived in London.\n\n#ontology {json.dumps(answer)}\n"

    bob.call(f"POST {DRAFT}", 409, "no_documents", project_id=project)
    bob.call(f"GET {DRAFT}", 404, "ontology_not_found", project_id=project)
    bob.call(f"DELETE {DRAFT}", 404, "ontology_not_found", project_id=project)
    bob.call(
        "POST /api/projects/{project_id}/ontology/draft/accept", 404, "ontology_not_found", project_id=project
    )
    for target, content in ((project, text), (failing, "#fail\n")):
        bob.call(
            "POST /api/projects/{project_id}/documents",
            201,
            files={"file": ("notes.txt", content.encode(), "text/plain")},
            project_id=target,
        )
    bob.call(f"POST {DRAFT}", 502, "draft_failed", project_id=failing)
    bob.call(f"POST {DRAFT}", 201, project_id=project)
    bob.call(f"DELETE {DRAFT}", 204, project_id=project)
    proposed = bob.call(f"POST {DRAFT}", 201, project_id=project).json()
    read = world.api("cy").call(f"GET {DRAFT}", 200, project_id=project).json()
    accepted = bob.call(
        "POST /api/projects/{project_id}/ontology/draft/accept", 200, project_id=project
    ).json()
    bob.call(f"POST {DRAFT}", 409, "ontology_exists", project_id=project)
    bob.call(
        "POST /api/projects/{project_id}/ontology/draft/accept", 404, "ontology_not_found", project_id=project
    )

    assert proposed["draft"]["relationship_types"] == {"LIVED_IN": {"domain": ["Person"], "range": ["City"]}}
    assert read["draft"] == proposed["draft"]
    assert accepted["ontology"]["entity_types"]["Person"] == {
        "description": "A human",
        "properties": {"born": "integer"},
    }

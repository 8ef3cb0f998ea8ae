"""The graph over REST: import, embedding progress, entities, history and the graph tools."""

from __future__ import annotations

import json
import uuid

from tests.blackbox.covers import covers
from tests.blackbox.protocol import graph_tools
from tests.blackbox.world import World

READ_TOOLS, WRITE_TOOLS = graph_tools()  # as docs/protocol.md §6 lists them


@covers("POST /api/projects/{project_id}/graph/import", "200")
def test_an_import_upserts_by_key_and_raises_the_graph_version(world: World) -> None:
    bob = world.api("bob")
    project = world.api("ada").call("POST /api/projects", 201, json={"name": "Imports"}).json()["id"]
    world.api("ada").call(
        "POST /api/projects/{project_id}/members",
        201,
        json={"username": "bob", "role": "editor"},
        project_id=project,
    )
    lines = [
        {"kind": "entity", "key": "a", "type": "T", "name": "A"},
        {"kind": "entity", "key": "b", "type": "T", "name": "B"},
        {"kind": "relationship", "type": "R", "src": "a", "dst": "b"},
    ]
    body = "\n".join(json.dumps(line) for line in lines)

    first = bob.call(
        "POST /api/projects/{project_id}/graph/import", 200, content=body, project_id=project
    ).json()
    again = bob.call(
        "POST /api/projects/{project_id}/graph/import",
        200,
        content=body.replace('"A"', '"A2"'),
        project_id=project,
    ).json()

    assert (first["entitiesCreated"], first["relationshipsCreated"], first["entitiesEmbedded"]) == (2, 1, 0)
    assert (again["entitiesCreated"], again["entitiesUpdated"]) == (0, 2)
    assert again["graphVersion"] == first["graphVersion"] + 1
    assert first["embedding"]["total"] == 2
    entity = bob.call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}", 200, project_id=project, id_or_key="a"
    ).json()
    assert entity["name"] == "A2"


@covers("POST /api/projects/{project_id}/graph/import", "400 invalid_import", "403 forbidden", "413")
def test_an_invalid_import_keeps_nothing_and_names_its_line(world: World) -> None:
    body = '{"kind": "entity", "key": "new-one", "type": "T", "name": "New"}\n{"kind": "relationship", "type": "R", "src": "new-one", "dst": "missing"}'

    refused = (
        world.api("bob")
        .call(
            "POST /api/projects/{project_id}/graph/import",
            400,
            "invalid_import",
            content=body,
            project_id=world.project_id,
        )
        .json()
    )

    assert refused["line"] == 2
    world.api("bob").call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}",
        404,
        "entity_not_found",
        project_id=world.project_id,
        id_or_key="new-one",
    )
    viewer = (
        world.api("cy")
        .call(
            "POST /api/projects/{project_id}/graph/import",
            403,
            "forbidden",
            content=body,
            project_id=world.project_id,
        )
        .json()
    )
    assert viewer["requiredRole"] == "editor"
    too_large = (
        b'{"kind": "entity", "key": "big", "type": "T", "name": "Big", "description": "'
        + b"x" * (50 * 1024 * 1024)
        + b'"}'
    )
    world.api("bob").call(
        "POST /api/projects/{project_id}/graph/import", 413, content=too_large, project_id=world.project_id
    )


@covers("GET /api/projects/{project_id}/graph/embedding", "200")
def test_any_member_sees_the_embedding_progress(world: World) -> None:
    progress = (
        world.api("cy")
        .call("GET /api/projects/{project_id}/graph/embedding", 200, project_id=world.project_id)
        .json()
    )

    assert progress["total"] == len(world.entities)
    assert progress["embedded"] + progress["pending"] <= progress["total"]
    assert progress["state"] in {"pending", "complete"}


@covers("GET /api/projects/{project_id}/graph/entities", "200", "400 invalid_request")
def test_entities_are_browsed_by_type_and_text(world: World) -> None:
    cy = world.api("cy")

    people = cy.call(
        "GET /api/projects/{project_id}/graph/entities",
        200,
        params={"type": "Person"},
        project_id=world.project_id,
    ).json()
    found = cy.call(
        "GET /api/projects/{project_id}/graph/entities",
        200,
        params={"q": "Babbage", "limit": 5},
        project_id=world.project_id,
    ).json()

    assert {e["key"] for e in people["items"]} == {"ada-lovelace", "charles-babbage"} and people["count"] == 2
    assert [e["key"] for e in found["items"]] == ["charles-babbage"]
    cy.call(
        "GET /api/projects/{project_id}/graph/entities",
        400,
        "invalid_request",
        params={"q": "x" * 1001},
        project_id=world.project_id,
    )
    cy.call(
        "GET /api/projects/{project_id}/graph/entities",
        400,
        "invalid_request",
        params={"limit": -1},
        project_id=world.project_id,
    )
    world.api("dan").call(
        "GET /api/projects/{project_id}/graph/entities", 404, "project_not_found", project_id=world.project_id
    )


@covers("GET /api/projects/{project_id}/graph/entities/{id_or_key}", "200", "404 entity_not_found")
def test_an_entity_is_read_by_key_or_id_with_its_edges(world: World) -> None:
    cy = world.api("cy")

    by_key = cy.call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}",
        200,
        project_id=world.project_id,
        id_or_key="ada-lovelace",
    ).json()
    by_id = cy.call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}",
        200,
        project_id=world.project_id,
        id_or_key=world.entities["ada-lovelace"],
    ).json()

    assert by_key == by_id and by_key["properties"] == {"born": 1815}
    assert {(e["type"], e["direction"], e["other"]["key"]) for e in by_key["edges"]} == {
        ("WORKED_WITH", "out", "charles-babbage"),
        ("LIVED_IN", "out", "london"),
    }
    cy.call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}",
        404,
        "entity_not_found",
        project_id=world.project_id,
        id_or_key="nobody",
    )


@covers("GET /api/projects/{project_id}/graph/entities/{id_or_key}/history", "200", "404 entity_not_found")
def test_an_entitys_history_lists_its_changes(world: World) -> None:
    cy = world.api("cy")

    history = cy.call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}/history",
        200,
        project_id=world.project_id,
        id_or_key="charles-babbage",
    ).json()

    actions = [c["action"] for c in history["items"]]
    assert "import_entity" in actions and "import_relationship" in actions
    assert all(c["authority"] == "import" for c in history["items"])
    cy.call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}/history",
        404,
        "entity_not_found",
        project_id=world.project_id,
        id_or_key=str(uuid.uuid4()),
    )


@covers("GET /api/projects/{project_id}/graph/tools", "200")
def test_the_graph_tools_are_listed_with_schemas_and_read_only_flags(world: World) -> None:
    tools = (
        world.api("cy")
        .call("GET /api/projects/{project_id}/graph/tools", 200, project_id=world.project_id)
        .json()
    )

    flags = {t["name"]: t["readOnly"] for t in tools["items"]}
    assert flags == {**dict.fromkeys(READ_TOOLS, True), **dict.fromkeys(WRITE_TOOLS, False)}
    assert all(t["inputSchema"]["type"] == "object" for t in tools["items"])


@covers(
    "POST /api/projects/{project_id}/graph/tools/{tool_name}",
    "200",
    "400 invalid_arguments",
    "404 entity_not_found",
    "404 unknown_tool",
)
def test_a_graph_tool_is_called_directly(world: World) -> None:
    cy = world.api("cy")
    call = "POST /api/projects/{project_id}/graph/tools/{tool_name}"

    edges = cy.call(
        call,
        200,
        json={"entity_id": "charles-babbage", "direction": "out"},
        project_id=world.project_id,
        tool_name="get_entity_edges",
    ).json()
    types = cy.call(call, 200, json={}, project_id=world.project_id, tool_name="list_entity_types").json()
    found = cy.call(
        call,
        200,
        json={"query": "Analytical", "limit": 3},
        project_id=world.project_id,
        tool_name="hybrid_search",
    ).json()

    assert edges["entity"]["key"] == "charles-babbage"
    assert [e["other"]["key"] for e in edges["edges"]] == ["analytical-engine"]
    assert {t["type"]: t["count"] for t in types["types"]} == {"Person": 2, "Machine": 1, "City": 1}
    assert found["results"][0]["key"] == "analytical-engine"
    bad = cy.call(
        call,
        400,
        "invalid_arguments",
        json={"entity_id": "london", "direction": "sideways"},
        project_id=world.project_id,
        tool_name="get_entity_edges",
    ).json()
    assert bad["argument"] == "direction"
    cy.call(
        call,
        400,
        "invalid_arguments",
        json={"query": "x", "surprise": 1},
        project_id=world.project_id,
        tool_name="search_entities",
    )
    cy.call(
        call,
        404,
        "entity_not_found",
        json={"entity_id": "nobody"},
        project_id=world.project_id,
        tool_name="get_entity_edges",
    )
    cy.call(call, 404, "unknown_tool", json={}, project_id=world.project_id, tool_name="drop_database")


@covers("POST /api/projects/{project_id}/graph/tools/{tool_name}", "403 forbidden", "403 approval_required")
def test_a_write_tool_needs_an_editor_and_over_rest_an_approval(world: World) -> None:
    call = "POST /api/projects/{project_id}/graph/tools/{tool_name}"
    new = {"key": "direct", "type": "T", "name": "Direct"}

    world.api("cy").call(
        call, 403, "forbidden", json=new, project_id=world.project_id, tool_name="create_entity"
    )
    world.api("bob").call(
        call, 403, "approval_required", json=new, project_id=world.project_id, tool_name="create_entity"
    )

    world.api("bob").call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}",
        404,
        "entity_not_found",
        project_id=world.project_id,
        id_or_key="direct",
    )

"""Agent definitions and the default agents over REST."""

from __future__ import annotations

import uuid
from typing import Any

from tests.blackbox.covers import covers
from tests.blackbox.world import World

LIST = "GET /api/projects/{project_id}/agent-definitions"
CREATE = "POST /api/projects/{project_id}/agent-definitions"
ONE = "/api/agent-definitions/{definition_id}"


def definition(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Answers about people.",
        "systemPrompt": "You answer with the graph tools.",
        "model": {"name": "openai/test-model", "temperature": 0.2},
        "tools": ["search_entities", "get_entity_edges"],
        "maxSteps": 4,
        **fields,
    }


@covers("GET /api/projects/{project_id}/agent-definitions", "200")
def test_members_list_the_projects_agent_definitions(world: World) -> None:
    listed = world.api("cy").call(LIST, 200, project_id=world.project_id).json()

    names = {a["name"] for a in listed["items"]}
    assert {"graph-query-agent", "graph-curator-agent"} <= names
    curator = next(a for a in listed["items"] if a["name"] == "graph-curator-agent")
    assert curator["toolPolicy"] == {tool: {"approval": "always"} for tool in curator["toolPolicy"]}
    assert curator["toolPolicy"]


@covers(
    "POST /api/projects/{project_id}/agent-definitions",
    "201",
    "400 invalid_agent_definition",
    "409 agent_definition_exists",
    "403 forbidden",
)
def test_an_editor_creates_a_definition_once_and_a_viewer_cannot(world: World) -> None:
    bob = world.api("bob")

    created = bob.call(CREATE, 201, json=definition("people-agent"), project_id=world.project_id).json()

    assert (created["projectId"], created["name"], created["model"]) == (
        world.project_id,
        "people-agent",
        {"name": "openai/test-model", "temperature": 0.2},
    )
    assert (
        created["visibility"] == "project"
        and created["flowType"] == "single"
        and created["disabledReason"] is None
    )
    bob.call(
        CREATE, 409, "agent_definition_exists", json=definition("people-agent"), project_id=world.project_id
    )
    bob.call(
        CREATE,
        400,
        "invalid_agent_definition",
        json=definition("bad-tools", tools=["no_such_tool"]),
        project_id=world.project_id,
    )
    bob.call(
        CREATE,
        400,
        "invalid_agent_definition",
        json=definition("bad-temperature", model={"name": "openai/test-model", "temperature": 3}),
        project_id=world.project_id,
    )
    world.api("cy").call(
        CREATE, 403, "forbidden", json=definition("viewer-agent"), project_id=world.project_id
    )


@covers("GET /api/agent-definitions/{definition_id}", "200", "404 agent_definition_not_found")
@covers("PATCH /api/agent-definitions/{definition_id}", "200", "403 forbidden")
@covers("DELETE /api/agent-definitions/{definition_id}", "204", "404 agent_definition_not_found")
def test_a_definition_is_read_updated_and_deleted(world: World) -> None:
    bob = world.api("bob")
    created = bob.call(CREATE, 201, json=definition("short-lived"), project_id=world.project_id).json()

    read = world.api("cy").call("GET " + ONE, 200, definition_id=created["id"]).json()
    patched = bob.call(
        "PATCH " + ONE, 200, json={"maxSteps": 2, "description": "Shorter."}, definition_id=created["id"]
    ).json()
    bob.call("DELETE " + ONE, 204, definition_id=created["id"])

    assert read == created
    assert (patched["maxSteps"], patched["description"], patched["name"]) == (2, "Shorter.", "short-lived")
    bob.call("GET " + ONE, 404, "agent_definition_not_found", definition_id=created["id"])
    bob.call("DELETE " + ONE, 404, "agent_definition_not_found", definition_id=created["id"])
    world.api("dan").call(
        "GET " + ONE, 404, "agent_definition_not_found", definition_id=world.agents["graph-query-agent"]
    )
    world.api("cy").call(
        "PATCH " + ONE,
        403,
        "forbidden",
        json={"maxSteps": 9},
        definition_id=world.agents["graph-query-agent"],
    )
    bob.call("GET " + ONE, 404, "agent_definition_not_found", definition_id=str(uuid.uuid4()))


@covers("POST /api/admin/projects/{project_id}/install-default-agents", "200", "403 forbidden")
def test_installing_the_default_agents_again_changes_nothing_and_needs_an_owner(world: World) -> None:
    again = (
        world.api("ada")
        .call(
            "POST /api/admin/projects/{project_id}/install-default-agents", 200, project_id=world.project_id
        )
        .json()
    )

    assert again["installed"] == []
    assert set(again["existing"]) == {"graph-query-agent", "graph-curator-agent"}
    refused = (
        world.api("bob")
        .call(
            "POST /api/admin/projects/{project_id}/install-default-agents",
            403,
            "forbidden",
            project_id=world.project_id,
        )
        .json()
    )
    assert refused["requiredRole"] == "owner"

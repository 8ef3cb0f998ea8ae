"""Extraction over REST (issue 26): the background worker asks the model per passage, the change
set is reviewed and written; settings; every refusal."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.blackbox.covers import covers
from tests.blackbox.world import World

FACTS = {
    "entities": [
        {"name": "Ada Lovelace", "type": "Person", "description": "A mathematician."},
        {"name": "Analytical Engine", "type": "Machine", "description": "A machine."},
    ],
    "relationships": [{"source": "Ada Lovelace", "type": "WROTE_ABOUT", "target": "Analytical Engine"}],
}


def _project(world: World, name: str) -> str:
    return world.new_project(name, members=(("bob", "editor"),))


def _upload(world: World, project: str, name: str, text: str) -> dict[str, Any]:
    return (
        world.api("bob")
        .call(
            "POST /api/projects/{project_id}/documents",
            201,
            files={"file": (name, text.encode(), "text/markdown")},
            project_id=project,
        )
        .json()["document"]
    )


@covers("POST /api/projects/{project_id}/documents/{document_id}/extraction", "202")
@covers(
    "GET /api/projects/{project_id}/documents/{document_id}/extraction", "200", "404 change_set_not_found"
)
@covers("GET /api/change-sets/{change_set_id}", "200", "404 change_set_not_found")
@covers(
    "POST /api/change-sets/{change_set_id}/decision",
    "200",
    "409 change_set_not_pending",
    "400 invalid_request",
)
def test_an_extraction_is_proposed_reviewed_and_written(world: World) -> None:
    bob = world.api("bob")
    project = _project(world, "Extraction")
    document = _upload(world, project, "notes.md", "Ada wrote notes.\n\n#facts " + json.dumps(FACTS) + "\n")
    path = {"project_id": project, "document_id": document["id"]}
    bob.call(
        "GET /api/projects/{project_id}/documents/{document_id}/extraction",
        404,
        "change_set_not_found",
        **path,
    )

    started = bob.call(
        "POST /api/projects/{project_id}/documents/{document_id}/extraction", 202, **path
    ).json()
    deadline = time.monotonic() + 120
    review = started
    while review["status"] == "running" and time.monotonic() < deadline:
        time.sleep(0.5)
        review = bob.call(
            "GET /api/projects/{project_id}/documents/{document_id}/extraction", 200, **path
        ).json()
    bob.call(
        "POST /api/change-sets/{change_set_id}/decision",
        400,
        "invalid_request",
        json={"approve": [999999999]},
        change_set_id=review["id"],
    )
    decided = bob.call(
        "POST /api/change-sets/{change_set_id}/decision",
        200,
        json={"approve": "all"},
        change_set_id=review["id"],
    ).json()

    assert review["status"] == "review", review
    assert review["progress"] == {"total": 2, "done": 2, "failed": 0, "pending": 0}
    assert {i["action"] for i in review["items"]} == {"create_entity", "create_relationship"}
    assert decided["status"] == "applied" and decided["graphVersion"] == 1
    bob.call(
        "POST /api/change-sets/{change_set_id}/decision",
        409,
        "change_set_not_pending",
        json={"approve": "all"},
        change_set_id=review["id"],
    )
    again = bob.call("GET /api/change-sets/{change_set_id}", 200, change_set_id=review["id"]).json()
    assert again["status"] == "applied"
    world.api("dan").call(
        "GET /api/change-sets/{change_set_id}", 404, "change_set_not_found", change_set_id=review["id"]
    )
    edges = bob.call(
        "GET /api/projects/{project_id}/graph/entities", 200, params={"q": "Ada Lovelace"}, project_id=project
    ).json()
    assert [e["name"] for e in edges["items"]] == ["Ada Lovelace"]


@covers("GET /api/projects/{project_id}/extraction-settings", "200")
@covers("PUT /api/projects/{project_id}/extraction-settings", "200", "403 forbidden")
def test_owners_set_the_extraction_settings(world: World) -> None:
    project = _project(world, "Extraction settings")

    changed = (
        world.api("ada")
        .call(
            "PUT /api/projects/{project_id}/extraction-settings",
            200,
            json={"allowNewTypes": True},
            project_id=project,
        )
        .json()
    )
    world.api("bob").call(
        "PUT /api/projects/{project_id}/extraction-settings",
        403,
        "forbidden",
        json={"ownersAutoApprove": True},
        project_id=project,
    )
    read = world.api("bob").call(
        "GET /api/projects/{project_id}/extraction-settings", 200, project_id=project
    )

    assert changed == {"allowNewTypes": True, "ownersAutoApprove": False}
    assert read.json() == changed

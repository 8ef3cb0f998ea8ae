"""Curation over REST (#51): a member proposes edits and merges as change sets, another reviews them
through the one decision route, an old citation of a merged entity still opens the winner, the
answer is marked stale, an undo proposes the inverse; every refusal."""

from __future__ import annotations

from typing import Any

from tests.blackbox.covers import covers
from tests.blackbox.world import GRAPH, World

TWIN = (
    '{"kind": "entity", "key": "ada-king", "type": "Person", "name": "Ada King"}\n'
    '{"kind": "relationship", "type": "WORKED_WITH", "src": "ada-king", "dst": "charles-babbage"}\n'
    '{"kind": "relationship", "type": "WROTE_ABOUT", "src": "ada-king", "dst": "analytical-engine"}\n'
)


def _project(world: World, name: str) -> str:
    return world.new_project(name, graph=GRAPH + TWIN)


def _propose(
    world: World, who: str, project: str, changes: Any, expect: int = 201, code: str | None = None
) -> Any:
    return (
        world.api(who)
        .call(
            "POST /api/projects/{project_id}/curation/change-sets",
            expect,
            code,
            json={"changes": changes},
            project_id=project,
        )
        .json()
    )


def _decide(world: World, who: str, change_set: str, expect: int = 200, code: str | None = None) -> Any:
    return (
        world.api(who)
        .call(
            "POST /api/change-sets/{change_set_id}/decision",
            expect,
            code,
            json={"approve": "all"},
            change_set_id=change_set,
        )
        .json()
    )


MERGE = [{"action": "merge_entities", "args": {"keep": "ada-lovelace", "merge": "ada-king"}}]


@covers("POST /api/projects/{project_id}/curation/change-sets", "201")
@covers("POST /api/change-sets/{change_set_id}/decision", "200", "403 own_change_set")
@covers("POST /api/change-sets/{change_set_id}/undo", "201")
def test_a_merge_is_proposed_reviewed_by_another_member_and_undone(world: World) -> None:
    project = _project(world, "Curated merge")
    bob = world.api("bob")
    king = bob.call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}",
        200,
        project_id=project,
        id_or_key="ada-king",
    ).json()

    proposed = _propose(world, "bob", project, MERGE)
    _decide(world, "bob", proposed["id"], 403, "own_change_set")
    decided = _decide(world, "ada", proposed["id"])
    cited = bob.call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}",
        200,
        project_id=project,
        id_or_key=king["id"],
    ).json()
    undo = bob.call("POST /api/change-sets/{change_set_id}/undo", 201, change_set_id=proposed["id"]).json()
    undone = _decide(world, "ada", undo["id"])
    back = bob.call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}",
        200,
        project_id=project,
        id_or_key=king["id"],
    ).json()

    assert proposed["kind"] == "curation" and proposed["status"] == "review"
    assert decided["status"] == "applied" and decided["graphVersion"] == 2
    assert cited["key"] == "ada-lovelace" and cited["mergedFrom"] == king["id"]
    assert "Ada King" in cited["properties"]["aliases"]
    assert {(e["type"], e["other"]["key"]) for e in cited["edges"]} >= {
        ("WORKED_WITH", "charles-babbage"),
        ("WROTE_ABOUT", "analytical-engine"),
    }
    assert undo["undoes"] == proposed["id"] and undo["items"][0]["action"] == "unmerge_entities"
    assert undone["status"] == "applied"
    assert back["key"] == "ada-king" and back["mergedFrom"] is None and len(back["edges"]) == 2


@covers("POST /api/projects/{project_id}/curation/change-sets", "409 merge_pending")
def test_a_merge_waiting_for_review_is_not_proposed_twice_and_the_refusal_names_it(world: World) -> None:
    project = _project(world, "Curated twice")
    first = _propose(world, "bob", project, MERGE)

    again = _propose(world, "ada", project, MERGE, 409, "merge_pending")
    turned = [{"action": "merge_entities", "args": {"keep": "ada-king", "merge": "ada-lovelace"}}]
    turned_round = _propose(world, "ada", project, turned, 409, "merge_pending")

    assert again["changeSetId"] == turned_round["changeSetId"] == first["id"]
    assert first["id"] in again["error"]


@covers(
    "POST /api/projects/{project_id}/curation/change-sets",
    "403 forbidden",
    "400 invalid_request",
    "400 unknown_action",
    "400 invalid_arguments",
    "400 entity_not_found",
    "400 nothing_to_change",
)
def test_bad_proposals_are_refused_with_a_reason_and_store_nothing(world: World) -> None:
    project = _project(world, "Curated refusals")

    _propose(world, "cy", project, MERGE, 403, "forbidden")
    _propose(world, "bob", project, [], 400, "invalid_request")
    _propose(world, "bob", project, [{"action": "drop_graph", "args": {}}], 400, "unknown_action")
    _propose(world, "bob", project, [{"action": "delete_entity", "args": {}}], 400, "invalid_arguments")
    _propose(
        world,
        "bob",
        project,
        [{"action": "delete_entity", "args": {"entity_id": "x"}}],
        400,
        "entity_not_found",
    )
    same = [{"action": "update_entity", "args": {"entity_id": "london", "name": "London"}}]
    _propose(world, "bob", project, same, 400, "nothing_to_change")

    listed = (
        world.api("bob").call("GET /api/projects/{project_id}/change-sets", 200, project_id=project).json()
    )
    assert listed == {"items": [], "count": 0}


@covers("POST /api/change-sets/{change_set_id}/decision", "409 change_set_apply_failed")
@covers(
    "POST /api/change-sets/{change_set_id}/undo",
    "409 nothing_to_undo",
    "404 change_set_not_found",
    "403 forbidden",
)
@covers("GET /api/projects/{project_id}/change-sets", "200", "400 invalid_request")
def test_a_change_set_the_graph_moved_past_writes_nothing_and_what_cannot_be_undone(world: World) -> None:
    project = _project(world, "Curated conflicts")
    delete = [
        {
            "action": "delete_relationship",
            "args": {"src": "ada-king", "type": "WORKED_WITH", "dst": "charles-babbage"},
        }
    ]
    first, second = _propose(world, "bob", project, delete), _propose(world, "bob", project, delete)
    _decide(world, "ada", first["id"])

    _decide(world, "ada", second["id"], 409, "change_set_apply_failed")
    bob = world.api("bob")
    bob.call("POST /api/change-sets/{change_set_id}/undo", 409, "nothing_to_undo", change_set_id=second["id"])
    bob.call("POST /api/change-sets/{change_set_id}/undo", 404, "change_set_not_found", change_set_id=project)
    world.api("cy").call(
        "POST /api/change-sets/{change_set_id}/undo", 403, "forbidden", change_set_id=first["id"]
    )
    waiting = bob.call(
        "GET /api/projects/{project_id}/change-sets",
        200,
        params={"kind": "curation", "status": "review"},
        project_id=project,
    ).json()
    bob.call(
        "GET /api/projects/{project_id}/change-sets",
        400,
        "invalid_request",
        params={"kind": "x"},
        project_id=project,
    )

    assert [c["id"] for c in waiting["items"]] == [second["id"]]


@covers("GET /api/projects/{project_id}/curation/settings", "200")
@covers("PUT /api/projects/{project_id}/curation/settings", "200", "403 forbidden")
def test_owners_let_authors_approve_their_own_change_sets(world: World) -> None:
    project = _project(world, "Curated settings")
    path = {"project_id": project}

    world.api("bob").call(
        "PUT /api/projects/{project_id}/curation/settings",
        403,
        "forbidden",
        json={"authorsApproveOwn": True},
        **path,
    )
    changed = world.api("ada").call(
        "PUT /api/projects/{project_id}/curation/settings", 200, json={"authorsApproveOwn": True}, **path
    )
    read = world.api("cy").call("GET /api/projects/{project_id}/curation/settings", 200, **path)
    proposed = _propose(world, "bob", project, MERGE)
    own = _decide(world, "bob", proposed["id"])

    assert changed.json() == read.json() == {"authorsApproveOwn": True}
    assert own["status"] == "applied"

"""The curation queues and the neighbourhood over REST (#51, docs/protocol.md §9): a member pages
through a queue with its cursor, reads an entity's capped star, and every documented refusal."""

from __future__ import annotations

from tests.blackbox.covers import covers
from tests.blackbox.world import GRAPH, World

QUEUES = "GET /api/projects/{project_id}/curation/queues/{kind}"
STAR = "GET /api/projects/{project_id}/graph/entities/{id_or_key}/neighbourhood"
EXTRA = (
    '{"kind": "entity", "key": "lonely-a", "type": "Thing", "name": "Lonely A"}\n'
    '{"kind": "entity", "key": "lonely-b", "type": "Thing", "name": "Lonely B"}\n'
    '{"kind": "entity", "key": "lovelace-ada", "type": "Person", "name": "Ada Lovelace"}\n'
)


def _project(world: World, name: str) -> str:
    return world.new_project(name, members=(("cy", "viewer"),), graph=GRAPH + EXTRA)


@covers("GET /api/projects/{project_id}/curation/queues/{kind}", "200", "400 invalid_cursor")
def test_a_viewer_pages_through_the_orphans_and_finds_a_duplicate_with_its_merge(world: World) -> None:
    project = _project(world, "Queues")
    cy = world.api("cy")

    first = cy.call(QUEUES, 200, project_id=project, kind="orphans", params={"limit": 1}).json()
    second = cy.call(
        QUEUES, 200, project_id=project, kind="orphans", params={"limit": 1, "cursor": first["nextCursor"]}
    ).json()
    pairs = cy.call(QUEUES, 200, project_id=project, kind="duplicates").json()
    orphans_cursor = {"cursor": first["nextCursor"]}
    for other in ("duplicates", "unsupported", "ontology-violations"):  # a cursor goes on its own queue only
        cy.call(QUEUES, 400, "invalid_cursor", project_id=project, kind=other, params=orphans_cursor)
    unsupported = cy.call(QUEUES, 200, project_id=project, kind="unsupported").json()

    assert [i["key"] for i in first["items"] + second["items"]] == ["lonely-a", "lonely-b"]
    pair = next(
        p for p in pairs["items"] if {p["a"]["key"], p["b"]["key"]} == {"ada-lovelace", "lovelace-ada"}
    )
    assert pair["evidence"]["nameEqual"] and pair["proposal"]["changes"][0]["action"] == "merge_entities"
    assert unsupported["items"] == []  # everything was imported


@covers(
    "GET /api/projects/{project_id}/curation/queues/{kind}",
    "404 unknown_queue",
    "400 invalid_cursor",
    "400 invalid_request",
    "404 project_not_found",
)
def test_a_queue_refuses_an_unknown_kind_a_forged_cursor_a_bad_limit_and_a_stranger(world: World) -> None:
    cy = world.api("cy")
    project = world.project_id

    cy.call(QUEUES, 404, "unknown_queue", project_id=project, kind="everything")
    cy.call(QUEUES, 400, "invalid_cursor", project_id=project, kind="orphans", params={"cursor": "bm9wZQ"})
    cy.call(QUEUES, 400, "invalid_request", project_id=project, kind="orphans", params={"limit": 101})
    world.api("dan").call(QUEUES, 404, "project_not_found", project_id=project, kind="orphans")


@covers(
    "GET /api/projects/{project_id}/graph/entities/{id_or_key}/neighbourhood",
    "200",
    "404 entity_not_found",
    "400 invalid_request",
)
def test_a_member_reads_an_entitys_capped_neighbourhood_by_type(world: World) -> None:
    cy = world.api("cy")
    project = world.project_id

    star = cy.call(STAR, 200, project_id=project, id_or_key="ada-lovelace", params={"limit": 1}).json()
    cities = cy.call(STAR, 200, project_id=project, id_or_key="ada-lovelace", params={"type": "City"}).json()
    cy.call(STAR, 404, "entity_not_found", project_id=project, id_or_key="nobody")
    cy.call(STAR, 400, "invalid_request", project_id=project, id_or_key="ada-lovelace", params={"limit": 0})

    assert star["center"]["key"] == "ada-lovelace" and len(star["nodes"]) == 1 and star["truncated"]
    assert star["types"] == {"City": 1, "Person": 1}
    assert [n["name"] for n in cities["nodes"]] == ["London"]

"""REST of the curation queues and the neighbourhood drawing (#51): pages behind a cursor, bounds,
JSON errors, members only; and the read-only tool ``curation_queue`` through the registry's REST."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from apps.curation import neighbourhood
from apps.graph_tools.registry import WriteAuthorization, tool_call
from tests.factories import add_member, make_entity, make_project, make_relationship, make_token, make_user

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def graph():
    owner, viewer = make_user(), make_user()
    project = make_project(owner)
    add_member(project, viewer, "viewer")
    hub = make_entity(project, "hub", "Person", "Hub Person")
    for n in range(5):
        make_relationship(project, hub, "KNOWS", make_entity(project, f"p{n}", "Person", f"Friend {n}"))
    make_relationship(project, hub, "LIVES_IN", make_entity(project, "city", "City", "Porto"))
    for key in ("o1", "o2", "o3"):
        make_entity(project, key, "Thing", f"Lonely {key}")
    return project, owner, viewer, hub


def test_a_viewer_pages_through_the_orphans_with_the_cursor_each_page_within_its_limit(graph):
    project, _, viewer, _ = graph
    url = f"/api/projects/{project.id}/curation/queues/orphans"

    first = _client(viewer).get(url, {"limit": 2}).json()
    second = _client(viewer).get(url, {"limit": 2, "cursor": first["nextCursor"]}).json()

    assert [i["key"] for i in first["items"]] == ["o1", "o2"]
    assert [i["key"] for i in second["items"]] == ["o3"] and second["nextCursor"] is None
    assert first["kind"] == "orphans" and first["bounds"]["limitMax"] == 100


@pytest.mark.parametrize("kind", ["duplicates", "unsupported"])
def test_every_queue_answers_the_same_page_shape(graph, kind):
    project, owner, _, _ = graph

    page = _client(owner).get(f"/api/projects/{project.id}/curation/queues/{kind}").json()

    assert set(page) == {"kind", "items", "nextCursor", "bounds"} and page["kind"] == kind


def test_a_bad_limit_cursor_or_kind_is_a_json_error_never_a_500(graph):
    project, owner, _, _ = graph
    client = _client(owner)
    base = f"/api/projects/{project.id}/curation/queues"

    answers = {
        "limit 0": client.get(f"{base}/orphans", {"limit": 0}),
        "limit 101": client.get(f"{base}/orphans", {"limit": 101}),
        "limit x": client.get(f"{base}/orphans", {"limit": "x"}),
        "cursor": client.get(f"{base}/orphans", {"cursor": "%%%"}),
        "long cursor": client.get(f"{base}/orphans", {"cursor": "a" * 1001}),
        "kind": client.get(f"{base}/everything"),
    }

    codes = {name: (r.status_code, r.json()["code"]) for name, r in answers.items()}
    assert codes == {
        "limit 0": (400, "invalid_request"),
        "limit 101": (400, "invalid_request"),
        "limit x": (400, "invalid_request"),
        "cursor": (400, "invalid_cursor"),
        "long cursor": (400, "invalid_request"),
        "kind": (404, "unknown_queue"),
    }
    assert all(r.json()["error"] for r in answers.values())


def test_a_cursor_of_one_queue_given_to_another_is_a_400_invalid_cursor_not_read(graph):
    project, owner, _, _ = graph
    client = _client(owner)
    base = f"/api/projects/{project.id}/curation/queues"
    cursor = client.get(f"{base}/orphans", {"limit": 2}).json()["nextCursor"]

    answers = {
        kind: client.get(f"{base}/{kind}", {"cursor": cursor})
        for kind in ("duplicates", "unsupported", "ontology-violations")
    }
    same = client.get(f"{base}/orphans", {"cursor": cursor})

    assert {kind: (r.status_code, r.json()["code"]) for kind, r in answers.items()} == {
        kind: (400, "invalid_cursor") for kind in answers
    }
    assert all(r.json()["error"] for r in answers.values())
    assert same.status_code == 200 and [i["key"] for i in same.json()["items"]] == ["o3"]


def test_queue_items_write_their_times_as_the_rest_schemas_do_utc_as_z(graph):
    project, owner, _, _ = graph
    client = _client(owner)
    base = f"/api/projects/{project.id}"
    async_to_sync(tool_call)(
        project_id=project.id,
        name="create_entity",
        arguments={"key": "typed", "type": "City", "name": "Hand Typed"},
        authorization=WriteAuthorization(via="direct", user_id=owner.pk),
    )

    orphans = client.get(f"{base}/curation/queues/orphans", {"limit": 100}).json()["items"]
    unsupported = client.get(f"{base}/curation/queues/unsupported", {"limit": 100}).json()["items"]
    entity = client.get(f"{base}/graph/entities/typed").json()
    history = client.get(f"{base}/graph/entities/typed/history").json()["items"]

    orphan = next(i for i in orphans if i["key"] == "typed")
    last = next(i for i in unsupported if i["key"] == "typed")["lastChange"]
    assert entity["createdAt"].endswith("Z") and orphan["createdAt"] == entity["createdAt"]
    assert last["createdAt"] == history[0]["createdAt"]
    assert all(i["createdAt"].endswith("Z") for i in orphans + unsupported)


def test_someone_who_is_not_a_member_gets_404_and_a_token_of_another_project_too(graph):
    project, owner, _, hub = graph
    stranger = make_user()
    other_token = make_token(owner, make_project(owner))

    stranger_queue = _client(stranger).get(f"/api/projects/{project.id}/curation/queues/orphans")
    token_queue = Client().get(
        f"/api/projects/{project.id}/curation/queues/orphans", HTTP_AUTHORIZATION=f"Bearer {other_token}"
    )
    stranger_star = _client(stranger).get(f"/api/projects/{project.id}/graph/entities/{hub.id}/neighbourhood")
    logged_out = Client().get(f"/api/projects/{project.id}/curation/queues/orphans")

    assert [r.status_code for r in (stranger_queue, token_queue, stranger_star)] == [404, 404, 404]
    assert stranger_queue.json()["code"] == "project_not_found" or stranger_queue.json()["code"].endswith(
        "not_found"
    )
    assert logged_out.status_code == 401 and logged_out.json()["code"] == "unauthorized"


def test_the_neighbourhood_is_capped_and_filtered_by_the_other_ends_type(graph):
    project, _, viewer, hub = graph
    url = f"/api/projects/{project.id}/graph/entities/{hub.id}/neighbourhood"

    capped = _client(viewer).get(url, {"limit": 3}).json()
    cities = _client(viewer).get(url + "?type=City").json()
    too_many = _client(viewer).get(url, {"limit": neighbourhood.LIMIT_MAX + 1})
    missing = _client(viewer).get(f"/api/projects/{project.id}/graph/entities/nobody/neighbourhood")

    assert capped["center"]["id"] == str(hub.id)
    assert len(capped["nodes"]) == 3 and len(capped["edges"]) == 3 and capped["truncated"]
    assert capped["types"] == {"City": 1, "Person": 5}
    assert [n["name"] for n in cities["nodes"]] == ["Porto"] and not cities["truncated"]
    assert cities["edges"] == [
        {
            "id": cities["edges"][0]["id"],
            "type": "LIVES_IN",
            "src": str(hub.id),
            "dst": cities["nodes"][0]["id"],
        }
    ]
    assert too_many.status_code == 400 and too_many.json()["code"] == "invalid_request"
    assert missing.status_code == 404 and missing.json()["code"] == "entity_not_found"


def test_a_hubs_neighbourhood_reads_a_bounded_number_of_relationships(graph, monkeypatch):
    monkeypatch.setattr(neighbourhood, "SCAN_MAX", 2)
    project, _, viewer, hub = graph

    star = _client(viewer).get(f"/api/projects/{project.id}/graph/entities/{hub.id}/neighbourhood").json()

    assert star["scanned"] == 2 and star["truncated"] and sum(star["types"].values()) == 2


def test_the_curation_queue_tool_serves_the_same_pages_through_the_tools_rest(graph):
    project, _, viewer, _ = graph
    url = f"/api/projects/{project.id}/graph/tools/curation_queue"

    listed = _client(viewer).get(f"/api/projects/{project.id}/graph/tools").json()
    page = _client(viewer).post(url, {"kind": "orphans", "limit": 2}, content_type="application/json")
    bad = _client(viewer).post(url, {"kind": "everything"}, content_type="application/json")
    forged = _client(viewer).post(url, {"kind": "orphans", "cursor": "%%%"}, content_type="application/json")

    tool = next(t for t in listed["items"] if t["name"] == "curation_queue")
    assert tool["readOnly"] is True
    assert [i["key"] for i in page.json()["items"]] == ["o1", "o2"] and page.json()["nextCursor"]
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_arguments"
    assert forged.status_code == 400 and forged.json()["code"] == "invalid_cursor"

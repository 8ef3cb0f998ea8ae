"""Membership isolation and API token authentication (PROTOCOL §1–§2)."""

import pytest
from django.test import Client
from django.utils import timezone

from apps.projects.models import ApiToken
from tests.factories import add_member, make_entity, make_project, make_token, make_user

pytestmark = pytest.mark.django_db


def bearer(secret: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def test_unauthenticated_call_gets_401_json():
    response = Client().get("/api/projects")

    assert response.status_code == 401
    assert response.json()["code"] == "unauthorized"


def test_projects_list_shows_only_my_projects_with_my_role():
    alice, bob = make_user("alice"), make_user("bob")
    mine = make_project(owner=alice, name="Alpha")
    theirs = make_project(owner=bob, name="Beta")
    add_member(theirs, alice, "viewer")
    make_project(owner=bob, name="Gamma")
    client = Client()
    client.force_login(alice)

    body = client.get("/api/projects").json()

    assert body["count"] == 2
    assert [(p["name"], p["role"]) for p in body["items"]] == [("Alpha", "owner"), ("Beta", "viewer")]
    assert body["items"][0]["id"] == str(mine.id)


def test_create_project_makes_me_owner():
    alice = make_user()
    client = Client()
    client.force_login(alice)

    response = client.post("/api/projects", {"name": "New one"}, content_type="application/json")

    assert response.status_code == 201
    assert response.json()["role"] == "owner"
    assert response.json()["slug"] == "new-one"


def test_non_member_gets_404_for_project_entities_and_import():
    owner, stranger = make_user(), make_user()
    project = make_project(owner=owner)
    entity = make_entity(project, "alice")
    client = Client()
    client.force_login(stranger)

    responses = [
        client.get(f"/api/projects/{project.id}"),
        client.get(f"/api/projects/{project.id}/graph/entities"),
        client.get(f"/api/projects/{project.id}/graph/entities/{entity.id}"),
        client.post(
            f"/api/projects/{project.id}/graph/import",
            '{"kind":"entity","key":"x","type":"T","name":"X"}',
            content_type="application/x-ndjson",
        ),
    ]

    assert [r.status_code for r in responses] == [404, 404, 404, 404]
    assert all(r.json()["code"] == "project_not_found" for r in responses)


def test_valid_token_authenticates():
    user = make_user()
    project = make_project(owner=user)
    secret = make_token(user)

    response = Client().get(f"/api/projects/{project.id}", **bearer(secret))

    assert response.status_code == 200
    assert response.json()["id"] == str(project.id)


def test_token_is_stored_hashed():
    user = make_user()

    secret = make_token(user)

    token = ApiToken.objects.get(user=user)
    assert secret not in (token.token_hash, token.prefix + token.token_hash)
    assert len(token.token_hash) == 64


def test_revoked_token_is_refused():
    user = make_user()
    secret = make_token(user)
    ApiToken.objects.filter(user=user).update(revoked_at=timezone.now())

    response = Client().get("/api/projects", **bearer(secret))

    assert response.status_code == 401


def test_unknown_token_is_refused():
    response = Client().get("/api/projects", **bearer("kgc_not-a-real-token"))

    assert response.status_code == 401


def test_token_bound_to_a_project_cannot_reach_another_project():
    user = make_user()
    a, b = make_project(owner=user, name="A"), make_project(owner=user, name="B")
    secret = make_token(user, project=a)

    listed = Client().get("/api/projects", **bearer(secret)).json()
    other = Client().get(f"/api/projects/{b.id}/graph/entities", **bearer(secret))
    own = Client().get(f"/api/projects/{a.id}/graph/entities", **bearer(secret))

    assert [p["id"] for p in listed["items"]] == [str(a.id)]
    assert other.status_code == 404
    assert own.status_code == 200


def test_viewer_cannot_import():
    owner, viewer = make_user(), make_user()
    project = make_project(owner=owner)
    add_member(project, viewer, "viewer")

    response = Client().post(
        f"/api/projects/{project.id}/graph/import",
        '{"kind":"entity","key":"x","type":"T","name":"X"}',
        content_type="application/x-ndjson",
        **bearer(make_token(viewer)),
    )

    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"

"""Members and roles managed by owners over REST (issue 14, item 1)."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.projects.models import ApiToken, ProjectMembership
from tests.factories import add_member, make_project, make_token, make_user

pytestmark = pytest.mark.django_db

JSON = "application/json"


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def members_url(project, user_id=None) -> str:
    base = f"/api/projects/{project.id}/members"
    return base if user_id is None else f"{base}/{user_id}"


def roles_of(project) -> dict[str, str]:
    return {
        m.user.username: m.role
        for m in ProjectMembership.objects.filter(project=project).select_related("user")
    }


@pytest.fixture
def team():
    owner, editor, viewer = make_user("olga"), make_user("ed"), make_user("vic")
    project = make_project(owner=owner, name="Team")
    add_member(project, editor, "editor")
    add_member(project, viewer, "viewer")
    return {"project": project, "owner": owner, "editor": editor, "viewer": viewer}


def test_any_member_lists_the_members_owners_first(team):
    response = client_of(team["viewer"]).get(members_url(team["project"]))

    body = response.json()
    assert response.status_code == 200
    assert body["count"] == 3
    assert [(m["username"], m["role"]) for m in body["items"]] == [
        ("olga", "owner"),
        ("ed", "editor"),
        ("vic", "viewer"),
    ]
    assert body["items"][0]["userId"] == team["owner"].pk
    assert set(body["items"][0]) == {"userId", "username", "displayName", "role", "joinedAt"}


def test_owner_adds_a_member_by_username_with_a_role(team):
    make_user("newbie")

    response = client_of(team["owner"]).post(
        members_url(team["project"]), {"username": "newbie", "role": "editor"}, content_type=JSON
    )

    assert response.status_code == 201
    assert response.json()["role"] == "editor"
    assert roles_of(team["project"])["newbie"] == "editor"


def test_owner_adds_a_member_by_email_case_insensitively(team):
    user = make_user("mailer")
    get_user_model().objects.filter(pk=user.pk).update(email="Mailer@Example.org")

    response = client_of(team["owner"]).post(
        members_url(team["project"]), {"email": "mailer@example.org"}, content_type=JSON
    )

    assert response.status_code == 201
    assert response.json()["username"] == "mailer"
    assert response.json()["role"] == "viewer"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"username": "nobody-here", "role": "viewer"}, 404, "user_not_found"),
        ({"email": "nobody@example.org"}, 404, "user_not_found"),
        ({"username": "ed", "role": "viewer"}, 409, "already_member"),
        ({"username": "x", "role": "admin"}, 400, "invalid_request"),
        ({"role": "viewer"}, 400, "invalid_request"),
        ({"username": "ed", "email": "ed@example.org"}, 400, "invalid_request"),
        ({"username": "x" * 255}, 400, "invalid_request"),
        ({"username": ""}, 400, "invalid_request"),
        ({"username": 7}, 400, "invalid_request"),
        ({"username": "a\u0000b"}, 400, "invalid_request"),
    ],
    ids=[
        "unknown-user",
        "unknown-email",
        "already-member",
        "bad-role",
        "nobody-named",
        "both-named",
        "too-long",
        "empty",
        "not-a-string",
        "nul",
    ],
)
def test_adding_a_member_with_bad_input_answers_4xx_json_and_changes_nothing(team, body, status, code):
    before = roles_of(team["project"])

    response = client_of(team["owner"]).post(members_url(team["project"]), body, content_type=JSON)

    assert response.status_code == status
    assert response.json()["code"] == code
    assert roles_of(team["project"]) == before


def test_two_users_sharing_an_email_must_be_named_by_username(team):
    for name in ("twin1", "twin2"):
        get_user_model().objects.filter(pk=make_user(name).pk).update(email="twins@example.org")

    response = client_of(team["owner"]).post(
        members_url(team["project"]), {"email": "twins@example.org"}, content_type=JSON
    )

    assert response.status_code == 400
    assert response.json()["code"] == "ambiguous_email"


def test_a_username_is_found_whatever_its_case(team):
    user = make_user("Grace.Hopper")

    response = client_of(team["owner"]).post(
        members_url(team["project"]), {"username": "  grace.HOPPER "}, content_type=JSON
    )

    assert response.status_code == 201
    assert roles_of(team["project"])[user.username] == "viewer"


def test_a_username_typed_exactly_wins_over_its_case_variants(team):
    make_user("ana"), make_user("Ana")

    response = client_of(team["owner"]).post(
        members_url(team["project"]), {"username": "ana"}, content_type=JSON
    )

    assert response.status_code == 201
    assert "ana" in roles_of(team["project"])
    assert "Ana" not in roles_of(team["project"])


def test_case_variants_of_a_username_without_an_exact_one_are_ambiguous(team):
    make_user("Lin"), make_user("LIN")
    before = roles_of(team["project"])

    response = client_of(team["owner"]).post(
        members_url(team["project"]), {"username": "lin"}, content_type=JSON
    )

    assert response.status_code == 400
    assert response.json()["code"] == "ambiguous_username"
    assert roles_of(team["project"]) == before


def test_owner_changes_a_role(team):
    response = client_of(team["owner"]).patch(
        members_url(team["project"], team["viewer"].pk), {"role": "editor"}, content_type=JSON
    )

    assert response.status_code == 200
    assert response.json()["role"] == "editor"
    assert roles_of(team["project"])["vic"] == "editor"


def test_the_last_owner_cannot_be_demoted_or_removed(team):
    owner = client_of(team["owner"])
    url = members_url(team["project"], team["owner"].pk)

    demoted = owner.patch(url, {"role": "editor"}, content_type=JSON)
    removed = owner.delete(url)

    assert (demoted.status_code, demoted.json()["code"]) == (409, "last_owner")
    assert (removed.status_code, removed.json()["code"]) == (409, "last_owner")
    assert roles_of(team["project"])["olga"] == "owner"


def test_an_owner_may_step_down_when_another_owner_remains(team):
    owner = client_of(team["owner"])
    owner.patch(members_url(team["project"], team["editor"].pk), {"role": "owner"}, content_type=JSON)

    response = owner.patch(
        members_url(team["project"], team["owner"].pk), {"role": "viewer"}, content_type=JSON
    )

    assert response.status_code == 200
    assert roles_of(team["project"]) == {"olga": "viewer", "ed": "owner", "vic": "viewer"}


def test_owner_removes_a_member_and_their_project_tokens_are_revoked(team):
    bound = make_token(team["viewer"], team["project"])
    unbound = make_token(team["viewer"])

    response = client_of(team["owner"]).delete(members_url(team["project"], team["viewer"].pk))

    assert response.status_code == 204
    assert "vic" not in roles_of(team["project"])
    assert Client().get("/api/projects", HTTP_AUTHORIZATION=f"Bearer {bound}").status_code == 401
    still = Client().get(f"/api/projects/{team['project'].id}", HTTP_AUTHORIZATION=f"Bearer {unbound}")
    assert still.status_code == 404
    assert ApiToken.objects.filter(user=team["viewer"], revoked_at__isnull=True).count() == 1


@pytest.mark.parametrize("who", ["editor", "viewer"])
def test_a_member_may_leave_a_project(team, who):
    response = client_of(team[who]).delete(members_url(team["project"], team[who].pk))

    assert response.status_code == 204
    assert team[who].username not in roles_of(team["project"])


def test_the_last_owner_cannot_leave(team):
    response = client_of(team["owner"]).delete(members_url(team["project"], team["owner"].pk))

    assert response.status_code == 409
    assert response.json()["code"] == "last_owner"


@pytest.mark.parametrize("who", ["editor", "viewer"])
def test_non_owners_cannot_change_members_and_are_told_the_role_needed(team, who):
    client = client_of(team[who])
    make_user("extra")

    responses = [
        client.post(members_url(team["project"]), {"username": "extra"}, content_type=JSON),
        client.patch(members_url(team["project"], team["viewer"].pk), {"role": "owner"}, content_type=JSON),
        client.delete(members_url(team["project"], team["owner"].pk)),
    ]

    assert [r.status_code for r in responses] == [403, 403, 403]
    assert {r.json()["code"] for r in responses} == {"forbidden"}
    assert {r.json()["requiredRole"] for r in responses} == {"owner"}
    assert roles_of(team["project"]) == {"olga": "owner", "ed": "editor", "vic": "viewer"}


@pytest.mark.parametrize(
    "user_ref",
    ["999999", "abc", "-1", "0", "1" * 30, "１２"],
    ids=["unknown", "word", "negative", "zero", "huge", "fullwidth"],
)
def test_bad_or_unknown_member_ids_answer_404(team, user_ref):
    owner = client_of(team["owner"])

    patched = owner.patch(members_url(team["project"], user_ref), {"role": "viewer"}, content_type=JSON)
    removed = owner.delete(members_url(team["project"], user_ref))

    assert (patched.status_code, patched.json()["code"]) == (404, "member_not_found")
    assert (removed.status_code, removed.json()["code"]) == (404, "member_not_found")


def test_a_user_who_is_not_a_member_is_not_found_as_a_target(team):
    outsider = make_user("outsider")

    response = client_of(team["owner"]).patch(
        members_url(team["project"], outsider.pk), {"role": "editor"}, content_type=JSON
    )

    assert response.status_code == 404
    assert response.json()["code"] == "member_not_found"


def test_non_members_get_404_for_every_member_route(team):
    stranger = client_of(make_user("stranger"))
    project = team["project"]

    responses = [
        stranger.get(members_url(project)),
        stranger.post(members_url(project), {"username": "stranger"}, content_type=JSON),
        stranger.patch(members_url(project, team["viewer"].pk), {"role": "owner"}, content_type=JSON),
        stranger.delete(members_url(project, team["viewer"].pk)),
    ]

    assert [r.status_code for r in responses] == [404, 404, 404, 404]
    assert {r.json()["code"] for r in responses} == {"project_not_found"}


def test_a_token_bound_to_another_project_cannot_manage_these_members(team):
    other = make_project(owner=team["owner"], name="Other")
    secret = make_token(team["owner"], other)

    response = Client().get(members_url(team["project"]), HTTP_AUTHORIZATION=f"Bearer {secret}")

    assert response.status_code == 404


def test_member_routes_are_in_the_openapi_schema():
    paths = Client().get("/api/openapi.json").json()["paths"]

    assert {"get", "post"} <= set(paths["/api/projects/{project_id}/members"])
    assert {"patch", "delete"} <= set(paths["/api/projects/{project_id}/members/{user_id}"])
    assert {"get", "post"} <= set(paths["/api/projects/{project_id}/invitations"])
    assert {"delete"} <= set(paths["/api/projects/{project_id}/invitations/{invitation_id}"])
    assert {"post"} <= set(paths["/api/invitations/accept"])

"""Projects, members and invitations over REST (docs/protocol.md §2)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.blackbox.clients import Api
from tests.blackbox.covers import covers
from tests.blackbox.server import Kgchat
from tests.blackbox.world import World, create_token_in_admin, create_user


@pytest.fixture(scope="module")
def team(world: World) -> str:
    """A project of ada's whose members the tests change (Atlas's stay as they are)."""
    project = world.api("ada").call("POST /api/projects", 201, json={"name": "Team"}).json()
    return str(project["id"])


@covers("GET /api/projects", "200")
def test_my_projects_are_listed_with_my_role(world: World) -> None:
    cy = world.api("cy")

    listed = cy.call("GET /api/projects", 200).json()

    assert ("atlas", "viewer") in {(p["slug"], p["role"]) for p in listed["items"]}
    assert listed["count"] == len(listed["items"])


@covers("POST /api/projects", "201")
def test_a_created_project_is_mine_as_owner_with_a_slug_made_from_its_name(world: World) -> None:
    bob = world.api("bob")

    created = bob.call("POST /api/projects", 201, json={"name": "Bob's Lab"}).json()

    assert created["role"] == "owner" and created["name"] == "Bob's Lab"
    assert created["slug"]
    listed = bob.call("GET /api/projects", 200).json()
    assert created["id"] in {p["id"] for p in listed["items"]}


@covers("POST /api/projects", "409 slug_taken", "400 invalid_request")
def test_a_taken_slug_and_an_invalid_name_or_slug_are_refused(world: World) -> None:
    ada = world.api("ada")

    ada.call("POST /api/projects", 409, "slug_taken", json={"name": "Another", "slug": "atlas"})
    ada.call("POST /api/projects", 400, "invalid_request", json={"name": ""})
    ada.call("POST /api/projects", 400, "invalid_request", json={"name": "x" * 201})
    ada.call("POST /api/projects", 400, "invalid_request", json={"name": "Uuid", "slug": str(uuid.uuid4())})
    ada.call("POST /api/projects", 400, "invalid_request", json={"name": "Nul\u0000"})


@covers("GET /api/projects/{project_id}", "200", "404 project_not_found")
def test_a_project_is_read_by_id_or_slug_and_is_not_found_outside_it(world: World) -> None:
    by_id = world.api("bob").call("GET /api/projects/{project_id}", 200, project_id=world.project_id).json()
    by_slug = world.api("bob").call("GET /api/projects/{project_id}", 200, project_id="atlas").json()

    assert by_id == by_slug and by_id["role"] == "editor"
    world.api("dan").call(
        "GET /api/projects/{project_id}", 404, "project_not_found", project_id=world.project_id
    )
    world.api("dan").call(
        "GET /api/projects/{project_id}", 404, "project_not_found", project_id=str(uuid.uuid4())
    )


# -- members ------------------------------------------------------------------------------------


@covers("GET /api/projects/{project_id}/members", "200")
def test_any_member_lists_the_members_owners_first(world: World) -> None:
    members = (
        world.api("cy")
        .call("GET /api/projects/{project_id}/members", 200, project_id=world.project_id)
        .json()
    )

    assert (members["items"][0]["username"], members["items"][0]["role"]) == ("ada", "owner")
    roles = {m["username"]: m["role"] for m in members["items"]}
    assert (roles["bob"], roles["cy"]) == ("editor", "viewer") and "dan" not in roles


@covers("POST /api/projects/{project_id}/members", "201", "409 already_member", "404 user_not_found")
def test_an_owner_adds_an_existing_user_once(world: World, team: str) -> None:
    ada = world.api("ada")

    added = ada.call(
        "POST /api/projects/{project_id}/members",
        201,
        json={"username": "dan", "role": "editor"},
        project_id=team,
    ).json()

    assert (added["username"], added["role"]) == ("dan", "editor")
    ada.call(
        "POST /api/projects/{project_id}/members",
        409,
        "already_member",
        json={"username": "dan"},
        project_id=team,
    )
    ada.call(
        "POST /api/projects/{project_id}/members",
        404,
        "user_not_found",
        json={"username": "nobody-here"},
        project_id=team,
    )


@covers("POST /api/projects/{project_id}/members", "400 ambiguous_email", "403 forbidden")
def test_an_email_shared_by_two_users_is_ambiguous_and_only_owners_add(
    world: World, admin: Api, team: str
) -> None:
    create_user(admin, "twin1", email="twin@example.com")
    create_user(admin, "twin2", email="TWIN@example.com")

    world.api("ada").call(
        "POST /api/projects/{project_id}/members",
        400,
        "ambiguous_email",
        json={"email": "twin@example.com"},
        project_id=team,
    )
    refused = world.api("bob").call(
        "POST /api/projects/{project_id}/members",
        403,
        "forbidden",
        json={"username": "twin1"},
        project_id=world.project_id,
    )
    assert refused.json()["requiredRole"] == "owner"


@covers("POST /api/projects/{project_id}/members", "201", "400 ambiguous_username")
def test_a_username_is_matched_whatever_its_case_unless_variants_make_it_ambiguous(
    kgchat: Kgchat, world: World, admin: Api, team: str
) -> None:
    create_user(admin, "Hedy", email="hedy@example.com")
    ada = world.api("ada")

    added = ada.call(
        "POST /api/projects/{project_id}/members", 201, json={"username": "hedy"}, project_id=team
    )
    assert added.json()["username"] == "Hedy"

    # The admin refuses a username that differs from another only in case; data from before it (an
    # operator's shell here) can still hold such variants, and then neither is guessed.
    kgchat.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import User; "
        "[User.objects.create_user(username=n) for n in ('Max', 'MAX')]",
    )
    ada.call(
        "POST /api/projects/{project_id}/members",
        400,
        "ambiguous_username",
        json={"username": "max"},
        project_id=team,
    )


@covers("PATCH /api/projects/{project_id}/members/{user_id}", "200", "404 member_not_found", "409 last_owner")
def test_an_owner_changes_a_role_but_not_the_last_owners(world: World, admin: Api, team: str) -> None:
    ada = world.api("ada")
    create_user(admin, "gil")
    gil = ada.call(
        "POST /api/projects/{project_id}/members", 201, json={"username": "gil"}, project_id=team
    ).json()
    me = next(
        m
        for m in ada.call("GET /api/projects/{project_id}/members", 200, project_id=team).json()["items"]
        if m["username"] == "ada"
    )

    changed = ada.call(
        "PATCH /api/projects/{project_id}/members/{user_id}",
        200,
        json={"role": "editor"},
        project_id=team,
        user_id=str(gil["userId"]),
    ).json()

    assert changed["role"] == "editor"
    ada.call(
        "PATCH /api/projects/{project_id}/members/{user_id}",
        404,
        "member_not_found",
        json={"role": "viewer"},
        project_id=team,
        user_id="999999",
    )
    ada.call(
        "PATCH /api/projects/{project_id}/members/{user_id}",
        404,
        "member_not_found",
        json={"role": "viewer"},
        project_id=team,
        user_id="not-a-number",
    )
    ada.call(
        "PATCH /api/projects/{project_id}/members/{user_id}",
        409,
        "last_owner",
        json={"role": "viewer"},
        project_id=team,
        user_id=str(me["userId"]),
    )


@covers("DELETE /api/projects/{project_id}/members/{user_id}", "204", "409 last_owner")
def test_an_owner_removes_a_member_a_member_leaves_and_the_last_owner_stays(
    world: World, admin: Api, team: str
) -> None:
    ada = world.api("ada")
    ids = {}
    for name in ("hal", "ivy"):
        create_user(admin, name)
        ids[name] = ada.call(
            "POST /api/projects/{project_id}/members", 201, json={"username": name}, project_id=team
        ).json()["userId"]
    me = next(
        m
        for m in ada.call("GET /api/projects/{project_id}/members", 200, project_id=team).json()["items"]
        if m["username"] == "ada"
    )

    ada.call(
        "DELETE /api/projects/{project_id}/members/{user_id}", 204, project_id=team, user_id=str(ids["hal"])
    )
    ivy = world.fresh("ivy")
    ivy.call(
        "DELETE /api/projects/{project_id}/members/{user_id}", 204, project_id=team, user_id=str(ids["ivy"])
    )

    usernames = {
        m["username"]
        for m in ada.call("GET /api/projects/{project_id}/members", 200, project_id=team).json()["items"]
    }
    assert "hal" not in usernames and "ivy" not in usernames
    ivy.call("GET /api/projects/{project_id}", 404, "project_not_found", project_id=team)
    ivy.close()
    ada.call(
        "DELETE /api/projects/{project_id}/members/{user_id}",
        409,
        "last_owner",
        project_id=team,
        user_id=str(me["userId"]),
    )


# -- invitations --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def invited(world: World, admin: Api) -> Iterator[Api]:
    create_user(admin, "jo")
    api = world.fresh("jo")
    yield api
    api.close()


@covers("POST /api/projects/{project_id}/invitations", "201", "403 forbidden")
@covers("GET /api/projects/{project_id}/invitations", "200")
@covers("POST /api/invitations/accept", "200", "404 invitation_used", "404 invitation_not_found")
def test_an_invitation_link_works_once_and_is_listed_without_its_token(
    world: World, team: str, invited: Api
) -> None:
    ada = world.api("ada")

    created = ada.call(
        "POST /api/projects/{project_id}/invitations",
        201,
        json={"role": "editor", "expiresInHours": 2},
        project_id=team,
    ).json()
    accepted = invited.call("POST /api/invitations/accept", 200, json={"token": created["token"]}).json()

    assert created["url"].endswith(f"/invite/{created['token']}")
    assert (accepted["project"]["id"], accepted["role"]) == (team, "editor")
    listed = ada.call("GET /api/projects/{project_id}/invitations", 200, project_id=team).json()
    mine = next(i for i in listed["items"] if i["id"] == created["id"])
    assert mine["status"] == "accepted" and mine["acceptedBy"] == "jo" and "token" not in mine
    invited.call("POST /api/invitations/accept", 404, "invitation_used", json={"token": created["token"]})
    invited.call("POST /api/invitations/accept", 404, "invitation_not_found", json={"token": "not-a-token"})
    world.api("bob").call(
        "POST /api/projects/{project_id}/invitations", 403, "forbidden", json={}, project_id=world.project_id
    )


@covers(
    "DELETE /api/projects/{project_id}/invitations/{invitation_id}",
    "204",
    "404 invitation_not_found",
    "409 invitation_used",
)
@covers("POST /api/invitations/accept", "404 invitation_revoked")
def test_a_revoked_invitation_cannot_be_accepted_and_a_used_one_cannot_be_revoked(
    world: World, team: str
) -> None:
    ada = world.api("ada")
    pending = ada.call("POST /api/projects/{project_id}/invitations", 201, json={}, project_id=team).json()
    used = ada.call(
        "POST /api/projects/{project_id}/invitations", 201, json={"role": "viewer"}, project_id=team
    ).json()
    world.api("cy").call("POST /api/invitations/accept", 200, json={"token": used["token"]})

    ada.call(
        "DELETE /api/projects/{project_id}/invitations/{invitation_id}",
        204,
        project_id=team,
        invitation_id=pending["id"],
    )
    ada.call(
        "DELETE /api/projects/{project_id}/invitations/{invitation_id}",
        204,
        project_id=team,
        invitation_id=pending["id"],
    )

    world.api("dan").call(
        "POST /api/invitations/accept", 404, "invitation_revoked", json={"token": pending["token"]}
    )
    ada.call(
        "DELETE /api/projects/{project_id}/invitations/{invitation_id}",
        404,
        "invitation_not_found",
        project_id=team,
        invitation_id=str(uuid.uuid4()),
    )
    ada.call(
        "DELETE /api/projects/{project_id}/invitations/{invitation_id}",
        409,
        "invitation_used",
        project_id=team,
        invitation_id=used["id"],
    )


@covers("POST /api/invitations/accept", "409 already_member")
def test_an_invitation_never_lowers_a_role(world: World) -> None:
    viewer_link = (
        world.api("ada")
        .call(
            "POST /api/projects/{project_id}/invitations",
            201,
            json={"role": "viewer"},
            project_id=world.project_id,
        )
        .json()
    )

    world.api("bob").call(
        "POST /api/invitations/accept", 409, "already_member", json={"token": viewer_link["token"]}
    )

    members = (
        world.api("ada")
        .call("GET /api/projects/{project_id}/members", 200, project_id=world.project_id)
        .json()
    )
    assert {m["username"]: m["role"] for m in members["items"]}["bob"] == "editor"


@covers("POST /api/invitations/accept", "403")
def test_a_token_bound_to_another_project_cannot_accept(world: World, team: str, admin: Api) -> None:
    ada = world.api("ada")
    kim = create_user(admin, "kim")
    side = ada.call("POST /api/projects", 201, json={"name": "Side"}).json()
    ada.call("POST /api/projects/{project_id}/members", 201, json={"username": "kim"}, project_id=side["id"])
    bound = Api(world.url, world.openapi, token=create_token_in_admin(admin, kim, side["id"], "side only"))
    link = ada.call("POST /api/projects/{project_id}/invitations", 201, json={}, project_id=team).json()

    refused = bound.call("POST /api/invitations/accept", 403, json={"token": link["token"]})

    bound.close()
    assert refused.json()["code"] == "forbidden"
    members = ada.call("GET /api/projects/{project_id}/members", 200, project_id=team).json()
    assert "kim" not in {m["username"] for m in members["items"]}


@covers("POST /api/projects/{project_id}/invitations", "409 too_many_invitations", "400 invalid_request")
def test_a_project_has_at_most_100_pending_invitations(world: World) -> None:
    ada = world.api("ada")
    crowded = ada.call("POST /api/projects", 201, json={"name": "Crowded"}).json()["id"]
    for _ in range(100):
        ada.call("POST /api/projects/{project_id}/invitations", 201, json={}, project_id=crowded)

    ada.call(
        "POST /api/projects/{project_id}/invitations",
        409,
        "too_many_invitations",
        json={},
        project_id=crowded,
    )
    ada.call(
        "POST /api/projects/{project_id}/invitations",
        400,
        "invalid_request",
        json={"expiresInHours": 0},
        project_id=crowded,
    )

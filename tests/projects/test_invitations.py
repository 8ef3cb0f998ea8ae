"""Invitations by link (issue 14, item 1): created and revoked by owners, accepted once by a logged-in user."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from apps.projects.models import ProjectInvitation, ProjectMembership
from apps.projects.selectors import Principal, token_hash
from apps.projects.services import MAX_PENDING_INVITATIONS, invitation_accept, invitation_create
from tests.factories import add_member, make_project, make_token, make_user

pytestmark = pytest.mark.django_db

JSON = "application/json"


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def invite(owner, project, **body):
    return client_of(owner).post(f"/api/projects/{project.id}/invitations", body, content_type=JSON)


def accept(user, token):
    return client_of(user).post("/api/invitations/accept", {"token": token}, content_type=JSON)


def role_of(project, user) -> str | None:
    membership = ProjectMembership.objects.filter(project=project, user=user).first()
    return membership.role if membership else None


@pytest.fixture
def owned():
    owner = make_user("owner")
    return owner, make_project(owner=owner, name="Invited")


def test_owner_creates_a_link_and_only_the_tokens_hash_is_stored(owned, settings):
    owner, project = owned
    settings.KGCHAT_INVITATION_TTL_HOURS = 48

    response = invite(owner, project, role="editor")

    body = response.json()
    stored = ProjectInvitation.objects.get(id=body["id"])
    assert response.status_code == 201
    assert body["role"] == "editor" and body["status"] == "pending" and body["createdBy"] == "owner"
    assert body["url"] == f"http://testserver/invite/{body['token']}"
    assert len(body["token"]) >= 43
    assert stored.token_hash == token_hash(body["token"])
    assert body["token"] not in stored.token_hash
    assert timedelta(hours=47) < stored.expires_at - timezone.now() <= timedelta(hours=48)


def test_invitee_accepts_and_becomes_a_member_with_the_invitations_role(owned):
    owner, project = owned
    token = invite(owner, project, role="editor").json()["token"]
    invitee = make_user("invitee")

    response = accept(invitee, token)

    assert response.status_code == 200
    assert response.json()["role"] == "editor"
    assert response.json()["project"]["id"] == str(project.id)
    assert role_of(project, invitee) == "editor"
    listed = client_of(invitee).get("/api/projects").json()["items"]
    assert [(p["name"], p["role"]) for p in listed] == [("Invited", "editor")]


def test_accepting_twice_answers_404_invitation_used(owned):
    owner, project = owned
    token = invite(owner, project).json()["token"]
    accept(make_user("first"), token)
    second = make_user("second")

    again_by_other = accept(second, token)

    assert (again_by_other.status_code, again_by_other.json()["code"]) == (404, "invitation_used")
    assert role_of(project, second) is None


def test_an_expired_invitation_answers_404_invitation_expired(owned):
    owner, project = owned
    past = timezone.now() - timedelta(hours=2)
    _, token = invitation_create(
        principal=Principal(user=owner), project_ref=project.id, role="viewer", expires_in_hours=1, now=past
    )
    invitee = make_user("late")

    response = accept(invitee, token)

    assert (response.status_code, response.json()["code"]) == (404, "invitation_expired")
    assert role_of(project, invitee) is None


def test_a_revoked_invitation_answers_404_invitation_revoked(owned):
    owner, project = owned
    created = invite(owner, project).json()
    revoked = client_of(owner).delete(f"/api/projects/{project.id}/invitations/{created['id']}")
    invitee = make_user("too-late")

    response = accept(invitee, created["token"])

    assert revoked.status_code == 204
    assert (response.status_code, response.json()["code"]) == (404, "invitation_revoked")
    assert role_of(project, invitee) is None


@pytest.mark.parametrize(
    "token",
    ["kgi_unknown", "", "x" * 5000, "kgi_\u0000", 12, None],
    ids=["unknown", "empty", "huge", "nul", "number", "null"],
)
def test_unknown_or_malformed_tokens_answer_4xx_json(owned, token):
    response = accept(make_user(), token)

    assert response.status_code in (400, 404)
    assert response.json()["code"] in ("invitation_not_found", "invalid_request")


def test_an_invitation_never_lowers_a_role_and_stays_unused_then(owned):
    owner, project = owned
    editor = make_user("ed")
    add_member(project, editor, "editor")
    token = invite(owner, project, role="viewer").json()["token"]

    response = accept(editor, token)

    assert (response.status_code, response.json()["code"]) == (409, "already_member")
    assert role_of(project, editor) == "editor"
    assert ProjectInvitation.objects.get(token_hash=token_hash(token)).accepted_at is None


def test_an_invitation_raises_a_lower_role(owned):
    owner, project = owned
    viewer = make_user("vi")
    add_member(project, viewer, "viewer")
    token = invite(owner, project, role="owner").json()["token"]

    response = accept(viewer, token)

    assert response.status_code == 200
    assert role_of(project, viewer) == "owner"


def test_owners_list_invitations_with_their_status(owned):
    owner, project = owned
    used = invite(owner, project, role="editor").json()
    accept(make_user("joiner"), used["token"])
    pending = invite(owner, project).json()

    body = client_of(owner).get(f"/api/projects/{project.id}/invitations").json()

    assert body["count"] == 2
    assert [(i["id"], i["status"]) for i in body["items"]] == [
        (pending["id"], "pending"),
        (used["id"], "accepted"),
    ]
    assert body["items"][1]["acceptedBy"] == "joiner"
    assert all("token" not in i for i in body["items"])


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_non_owners_cannot_create_list_or_revoke_invitations(owned, role):
    owner, project = owned
    member = make_user()
    add_member(project, member, role)
    created = invite(owner, project).json()
    client = client_of(member)

    responses = [
        client.post(f"/api/projects/{project.id}/invitations", {"role": "viewer"}, content_type=JSON),
        client.get(f"/api/projects/{project.id}/invitations"),
        client.delete(f"/api/projects/{project.id}/invitations/{created['id']}"),
    ]

    assert [r.status_code for r in responses] == [403, 403, 403]
    assert {r.json()["requiredRole"] for r in responses} == {"owner"}
    assert ProjectInvitation.objects.filter(project=project).count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"role": "admin"}, "role"),
        ({"expiresInHours": 0}, "expiresInHours"),
        ({"expiresInHours": 10**9}, "expiresInHours"),
        ({"expiresInHours": "soon"}, "expiresInHours"),
    ],
    ids=["bad-role", "zero-hours", "huge-hours", "text-hours"],
)
def test_creating_an_invitation_with_bad_input_answers_400_and_creates_nothing(owned, body, field):
    owner, project = owned

    response = invite(owner, project, **body)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert field in response.json()["error"]
    assert not ProjectInvitation.objects.exists()


@pytest.mark.parametrize("invitation_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_revoking_an_unknown_invitation_answers_404(owned, invitation_id):
    owner, project = owned

    response = client_of(owner).delete(f"/api/projects/{project.id}/invitations/{invitation_id}")

    assert (response.status_code, response.json()["code"]) == (404, "invitation_not_found")


def test_another_projects_invitation_cannot_be_revoked_through_this_one(owned):
    owner, project = owned
    other = make_project(owner=owner, name="Other")
    created = invite(owner, other).json()

    response = client_of(owner).delete(f"/api/projects/{project.id}/invitations/{created['id']}")

    assert response.status_code == 404
    assert ProjectInvitation.objects.get(id=created["id"]).revoked_at is None


def test_a_used_invitation_cannot_be_revoked(owned):
    owner, project = owned
    created = invite(owner, project).json()
    accept(make_user("in"), created["token"])

    response = client_of(owner).delete(f"/api/projects/{project.id}/invitations/{created['id']}")

    assert (response.status_code, response.json()["code"]) == (409, "invitation_used")


def test_pending_invitations_per_project_are_capped(owned):
    owner, project = owned
    principal = Principal(user=owner)
    for _ in range(MAX_PENDING_INVITATIONS):
        invitation_create(principal=principal, project_ref=project.id, role="viewer")

    response = invite(owner, project)

    assert (response.status_code, response.json()["code"]) == (409, "too_many_invitations")


def test_a_token_bound_to_another_project_cannot_accept(owned):
    owner, project = owned
    token = invite(owner, project).json()["token"]
    invitee = make_user("bound")
    bound = make_token(invitee, make_project(owner=invitee, name="Mine"))

    response = Client().post(
        "/api/invitations/accept", {"token": token}, content_type=JSON, HTTP_AUTHORIZATION=f"Bearer {bound}"
    )

    assert response.status_code == 403
    assert role_of(project, invitee) is None


def test_accepting_needs_a_login():
    response = Client().post("/api/invitations/accept", {"token": "kgi_x"}, content_type=JSON)

    assert response.status_code == 401


def test_service_accepts_once_under_the_clock_it_is_given(owned):
    owner, project = owned
    now = timezone.now()
    _, token = invitation_create(
        principal=Principal(user=owner), project_ref=project.id, role="editor", expires_in_hours=1, now=now
    )
    invitee = make_user("clocked")

    accepted = invitation_accept(
        principal=Principal(user=invitee), token=token, now=now + timedelta(minutes=59)
    )

    assert accepted.role == "editor"
    assert ProjectInvitation.objects.get(token_hash=token_hash(token)).accepted_by == invitee


# --- the page ------------------------------------------------------------------------------------


def test_invite_page_sends_a_logged_out_visitor_to_login_and_back(owned):
    owner, project = owned
    token = invite(owner, project).json()["token"]

    response = Client().get(f"/invite/{token}")

    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next=/invite/{token}"


def test_invite_page_asks_then_accepts_on_post(owned):
    owner, project = owned
    token = invite(owner, project, role="editor").json()["token"]
    invitee = make_user("pager")
    client = client_of(invitee)

    asked = client.get(f"/invite/{token}")
    before = role_of(project, invitee)
    accepted = client.post(f"/invite/{token}")

    assert asked.status_code == 200
    assert b"Join Invited" in asked.content and b"Accept and join" in asked.content
    assert before is None
    assert accepted.status_code == 302 and accepted["Location"] == "/chat/"
    assert role_of(project, invitee) == "editor"


@pytest.mark.parametrize("state", ["unknown", "used", "revoked"])
def test_invite_page_explains_a_link_that_cannot_be_used(owned, state):
    owner, project = owned
    created = invite(owner, project).json()
    if state == "used":
        accept(make_user("earlier"), created["token"])
    if state == "revoked":
        client_of(owner).delete(f"/api/projects/{project.id}/invitations/{created['id']}")
    token = "kgi_nope" if state == "unknown" else created["token"]

    response = client_of(make_user()).get(f"/invite/{token}")

    assert response.status_code == 404
    assert b"This invitation cannot be used" in response.content


def test_invite_page_tells_a_member_with_that_role_already_and_offers_no_accept(owned):
    owner, project = owned
    token = invite(owner, project, role="viewer").json()["token"]

    response = client_of(owner).get(f"/invite/{token}")

    assert response.status_code == 200
    assert b"You already are owner" in response.content
    assert b"Accept and join" not in response.content


def test_invite_page_post_needs_the_csrf_token(owned):
    owner, project = owned
    token = invite(owner, project).json()["token"]
    invitee = make_user("csrf")
    client = Client(enforce_csrf_checks=True)
    client.force_login(invitee)

    response = client.post(f"/invite/{token}")

    assert response.status_code == 403
    assert role_of(project, invitee) is None

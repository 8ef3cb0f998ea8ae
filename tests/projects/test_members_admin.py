"""The admin for members and invitations: memberships inline on the project, invitations listed and revocable."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.projects.models import ProjectInvitation
from apps.projects.selectors import Principal
from apps.projects.services import invitation_create
from tests.factories import add_member, make_project, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client():
    user = get_user_model().objects.create_superuser("root", "", "pw-root-123")
    client = Client()
    client.force_login(user)
    return client


def test_project_admin_shows_its_memberships_inline(admin_client):
    owner, viewer = make_user("inline-owner"), make_user("inline-viewer")
    project = make_project(owner=owner)
    add_member(project, viewer, "viewer")

    page = admin_client.get(f"/admin/projects/project/{project.id}/change/").content.decode()

    assert "memberships-TOTAL_FORMS" in page
    assert "inline-owner" in page and "inline-viewer" in page


def test_invitations_are_listed_not_added_and_revoked_by_the_admin_action(admin_client):
    owner = make_user("inviter")
    project = make_project(owner=owner)
    invitation, _ = invitation_create(principal=Principal(user=owner), project_ref=project.id, role="editor")

    listing = admin_client.get("/admin/projects/projectinvitation/")
    add_form = admin_client.get("/admin/projects/projectinvitation/add/")
    admin_client.post(
        "/admin/projects/projectinvitation/",
        {"action": "revoke", "_selected_action": [str(invitation.id)]},
    )

    assert listing.status_code == 200 and "pending" in listing.content.decode()
    assert add_form.status_code == 403
    assert ProjectInvitation.objects.get(id=invitation.id).revoked_at is not None

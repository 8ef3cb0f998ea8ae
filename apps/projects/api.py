"""REST routes for projects (PROTOCOL §2)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from ninja import Router, Schema, Status
from pydantic import Field

from apps.core.inputs import ListLimit, ListOffset
from apps.core.paging import page_of
from apps.projects import selectors, services
from apps.projects.auth import principal_of
from apps.projects.models import ProjectInvitation, ProjectMembership

router = Router(tags=["projects"])


class ProjectOut(Schema):
    id: uuid.UUID
    name: str
    slug: str
    role: str | None
    createdAt: datetime


class ProjectIn(Schema):
    name: str
    slug: str | None = None


class ProjectList(Schema):
    items: list[ProjectOut]
    count: int


def _project_out(project: object, role: str | None) -> ProjectOut:
    from apps.projects.models import Project

    assert isinstance(project, Project)
    return ProjectOut(
        id=project.id, name=project.name, slug=project.slug, role=role, createdAt=project.created_at
    )


@router.get("/projects", response=ProjectList)
def list_projects(request: HttpRequest, limit: ListLimit = 100, offset: ListOffset = 0) -> ProjectList:
    principal = principal_of(request)
    rows = selectors.project_list_with_roles(principal=principal)
    page = page_of(rows, limit=limit, offset=offset, size=PAGE_SIZE)
    return ProjectList(items=[_project_out(p, role) for p, role in page.items], count=page.count)


@router.post("/projects", response={201: ProjectOut})
def create_project(request: HttpRequest, payload: ProjectIn) -> Status[ProjectOut]:
    principal = principal_of(request)
    project = services.project_create(owner=principal.user, name=payload.name, slug=payload.slug)
    return Status(201, _project_out(project, "owner"))


@router.get("/projects/{project_id}", response=ProjectOut)
def get_project(request: HttpRequest, project_id: str) -> ProjectOut:
    principal = principal_of(request)
    project = selectors.project_get(principal=principal, project_ref=project_id)
    return _project_out(project, selectors.project_role(principal=principal, project=project))


# --- members and invitations -----------------------------------------------------------------

RoleName = Literal["owner", "editor", "viewer"]
PAGE_SIZE = 500


class MemberOut(Schema):
    userId: int
    username: str
    displayName: str
    role: str
    joinedAt: datetime


class MemberList(Schema):
    items: list[MemberOut]
    count: int


class MemberIn(Schema):
    username: str | None = Field(None, description="Name the user by username …")
    email: str | None = Field(None, description="… or by e-mail address (exactly one of the two).")
    role: RoleName = "viewer"


class RoleIn(Schema):
    role: RoleName


def _member_out(membership: ProjectMembership) -> MemberOut:
    user = membership.user
    return MemberOut(
        userId=user.pk,
        username=user.get_username(),
        displayName=user.get_full_name() or user.get_username(),
        role=membership.role,
        joinedAt=membership.created_at,
    )


@router.get("/projects/{project_id}/members", response=MemberList)
def list_members(
    request: HttpRequest, project_id: str, limit: ListLimit = PAGE_SIZE, offset: ListOffset = 0
) -> MemberList:
    members = selectors.member_list(principal=principal_of(request), project_ref=project_id)
    page = page_of(members, limit=limit, offset=offset, size=PAGE_SIZE)
    return MemberList(items=[_member_out(m) for m in page.items], count=page.count)


@router.post("/projects/{project_id}/members", response={201: MemberOut})
def add_member(request: HttpRequest, project_id: str, payload: MemberIn) -> Status[MemberOut]:
    membership = services.member_add(
        principal=principal_of(request),
        project_ref=project_id,
        role=payload.role,
        username=payload.username,
        email=payload.email,
    )
    return Status(201, _member_out(membership))


@router.patch("/projects/{project_id}/members/{user_id}", response=MemberOut)
def change_member_role(request: HttpRequest, project_id: str, user_id: str, payload: RoleIn) -> MemberOut:
    membership = services.member_role_set(
        principal=principal_of(request), project_ref=project_id, user_id=user_id, role=payload.role
    )
    return _member_out(membership)


@router.delete("/projects/{project_id}/members/{user_id}", response={204: None})
def remove_member(request: HttpRequest, project_id: str, user_id: str) -> Status[None]:
    services.member_remove(principal=principal_of(request), project_ref=project_id, user_id=user_id)
    return Status(204, None)


class InvitationOut(Schema):
    id: uuid.UUID
    projectId: uuid.UUID
    role: str
    status: str
    createdBy: str | None
    createdAt: datetime
    expiresAt: datetime
    acceptedBy: str | None
    acceptedAt: datetime | None
    revokedAt: datetime | None


class InvitationCreatedOut(InvitationOut):
    token: str
    url: str


class InvitationList(Schema):
    items: list[InvitationOut]
    count: int


class InvitationIn(Schema):
    role: RoleName = "viewer"
    expiresInHours: Annotated[int, Field(ge=1, le=services.MAX_INVITATION_HOURS)] | None = None


class AcceptIn(Schema):
    token: str


class AcceptOut(Schema):
    project: ProjectOut
    role: str


def _invitation_out(invitation: ProjectInvitation) -> InvitationOut:
    created_by, accepted_by = invitation.created_by, invitation.accepted_by
    return InvitationOut(
        id=invitation.id,
        projectId=invitation.project_id,
        role=invitation.role,
        status=invitation.status_at(timezone.now()),
        createdBy=created_by.get_username() if created_by else None,
        createdAt=invitation.created_at,
        expiresAt=invitation.expires_at,
        acceptedBy=accepted_by.get_username() if accepted_by else None,
        acceptedAt=invitation.accepted_at,
        revokedAt=invitation.revoked_at,
    )


@router.get("/projects/{project_id}/invitations", response=InvitationList)
def list_invitations(
    request: HttpRequest, project_id: str, limit: ListLimit = PAGE_SIZE, offset: ListOffset = 0
) -> InvitationList:
    invitations = selectors.invitation_list(principal=principal_of(request), project_ref=project_id)
    page = page_of(invitations, limit=limit, offset=offset, size=PAGE_SIZE)
    return InvitationList(items=[_invitation_out(i) for i in page.items], count=page.count)


@router.post("/projects/{project_id}/invitations", response={201: InvitationCreatedOut})
def create_invitation(
    request: HttpRequest, project_id: str, payload: InvitationIn
) -> Status[InvitationCreatedOut]:
    invitation, token = services.invitation_create(
        principal=principal_of(request),
        project_ref=project_id,
        role=payload.role,
        expires_in_hours=payload.expiresInHours,
    )
    url = request.build_absolute_uri(reverse("projects:invitation", args=[token]))
    return Status(201, InvitationCreatedOut(**_invitation_out(invitation).model_dump(), token=token, url=url))


@router.delete("/projects/{project_id}/invitations/{invitation_id}", response={204: None})
def revoke_invitation(request: HttpRequest, project_id: str, invitation_id: str) -> Status[None]:
    services.invitation_revoke(
        principal=principal_of(request), project_ref=project_id, invitation_id=invitation_id
    )
    return Status(204, None)


@router.post("/invitations/accept", response=AcceptOut)
def accept_invitation(request: HttpRequest, payload: AcceptIn) -> AcceptOut:
    accepted = services.invitation_accept(principal=principal_of(request), token=payload.token)
    return AcceptOut(project=_project_out(accepted.project, accepted.role), role=accepted.role)

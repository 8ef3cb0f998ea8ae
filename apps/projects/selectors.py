"""Reads about projects and access. Every lookup is scoped to what the principal may see."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.utils import timezone

from apps.core.errors import NotFound, PermissionDenied
from apps.core.inputs import input_problem
from apps.core.prepared import QueryTemplate
from apps.projects.models import (
    ApiToken,
    InvitationStatus,
    Project,
    ProjectInvitation,
    ProjectMembership,
    Role,
)


class ProjectNotFound(NotFound):
    """project not found"""

    code = "project_not_found"


@dataclass(frozen=True)
class Principal:
    """Who is calling: a user, and the one project an API token is bound to (None: all of theirs)."""

    user: User
    token_project_id: uuid.UUID | None = None

    @property
    def user_id(self) -> int:
        return int(self.user.pk)


ROLE_RANK = {Role.VIEWER: 0, Role.EDITOR: 1, Role.OWNER: 2}


class RoleTooLow(PermissionDenied):
    """A member whose role is below what the request needs; the REST body names it (``requiredRole``)."""

    code = "forbidden"

    def __init__(self, required: str) -> None:
        super().__init__(f"this needs the {required} role in the project")
        self.required = str(required)

    @property
    def extra(self) -> dict[str, str]:
        return {"requiredRole": self.required}


def principal_of(*, user_id: int, token_project_id: uuid.UUID | None) -> Principal:
    """A principal by its ids (its user not read): what a query template builds its query for."""
    return Principal(user=User(pk=user_id), token_project_id=token_project_id)


def parse_uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        return None


def project_list(*, principal: Principal) -> QuerySet[Project]:
    qs = Project.objects.filter(memberships__user_id=principal.user_id)
    if principal.token_project_id is not None:
        qs = qs.filter(id=principal.token_project_id)
    return qs.order_by("name")


def project_role(*, principal: Principal, project: Project) -> str | None:
    membership = ProjectMembership.objects.filter(project=project, user_id=principal.user_id).first()
    return membership.role if membership else None


def project_get(*, principal: Principal, project_ref: object, min_role: str = Role.VIEWER) -> Project:
    """Return a project the principal is a member of, by id or slug; others answer ``ProjectNotFound``."""
    qs = project_list(principal=principal)
    project_id = parse_uuid(project_ref)
    project = qs.filter(id=project_id).first() if project_id else qs.filter(slug=str(project_ref)).first()
    if project is None:
        raise ProjectNotFound()
    if min_role != Role.VIEWER:
        role = project_role(principal=principal, project=project)
        if role is None or ROLE_RANK[Role(role)] < ROLE_RANK[Role(min_role)]:
            raise RoleTooLow(min_role)
    return project


def project_get_by_ref(*, project_ref: str) -> Project:
    """Return a project by id or slug without access checks (operators' commands)."""
    project_id = parse_uuid(project_ref)
    project = (
        Project.objects.filter(id=project_id).first()
        if project_id
        else Project.objects.filter(slug=project_ref).first()
    )
    if project is None:
        raise ProjectNotFound(f"no project {project_ref!r}")
    return project


def token_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _active_token_query(*, digest: str) -> QuerySet[ApiToken]:
    return ApiToken.objects.select_related("user").filter(
        token_hash=digest, revoked_at__isnull=True, user__is_active=True
    )


# Every API request reads it: compiled once (and prepared on a pooled connection).
_ACTIVE_TOKEN = QueryTemplate(_active_token_query, first=True)


def principal_from_token(*, secret: str) -> Principal | None:
    """Return the principal of an active API token, or None."""
    if not secret:
        return None
    token = _ACTIVE_TOKEN.first(digest=token_hash(secret))
    if token is None:
        return None
    return Principal(user=token.user, token_project_id=token.project_id)


def principal_from_user(user: AbstractBaseUser | AnonymousUser | None) -> Principal | None:
    if user is None or not user.is_authenticated:
        return None
    assert isinstance(user, User)
    return Principal(user=user)


def project_list_with_roles(*, principal: Principal) -> list[tuple[Project, str]]:
    memberships = ProjectMembership.objects.filter(user_id=principal.user_id).select_related("project")
    if principal.token_project_id is not None:
        memberships = memberships.filter(project_id=principal.token_project_id)
    return sorted(((m.project, m.role) for m in memberships), key=lambda pr: pr[0].name.lower())


class MemberNotFound(NotFound):
    """member not found"""

    code = "member_not_found"


class InvitationNotFound(NotFound):
    """invitation not found"""

    code = "invitation_not_found"


# What a token that can no longer be accepted answers: 404 like an unknown one, with its reason.
INVITATION_GONE = {
    InvitationStatus.ACCEPTED: ("this invitation has already been used", "invitation_used"),
    InvitationStatus.REVOKED: ("this invitation has been revoked", "invitation_revoked"),
    InvitationStatus.EXPIRED: ("this invitation has expired", "invitation_expired"),
}
MAX_INVITATION_TOKEN_CHARS = 200
MAX_USER_ID = 2**63 - 1


def parse_user_id(value: object) -> int | None:
    """The user id ``value`` names (decimal digits within bigint), or None."""
    text = str(value)
    if not text.isascii() or not text.isdigit() or len(text) > 19:
        return None
    number = int(text)
    return number if 0 < number <= MAX_USER_ID else None


def member_list(*, principal: Principal, project_ref: object) -> QuerySet[ProjectMembership]:
    """The members of a project the principal belongs to (any role): owners first, then by username."""
    project = project_get(principal=principal, project_ref=project_ref)
    rank = Case(
        *(When(role=role, then=Value(2 - n)) for role, n in ROLE_RANK.items()),
        output_field=IntegerField(),
    )
    return (
        ProjectMembership.objects.filter(project=project)
        .select_related("user")
        .annotate(role_order=rank)
        .order_by("role_order", "user__username")
    )


def member_get(*, project: Project, user_ref: object) -> ProjectMembership:
    """The membership of the user ``user_ref`` (an id) in ``project``; ``MemberNotFound`` otherwise."""
    user_id = parse_user_id(user_ref)
    membership = (
        ProjectMembership.objects.select_related("user").filter(project=project, user_id=user_id).first()
        if user_id is not None
        else None
    )
    if membership is None:
        raise MemberNotFound()
    return membership


def invitation_list(*, principal: Principal, project_ref: object) -> QuerySet[ProjectInvitation]:
    """A project's invitations, newest first; only its owners may see them."""
    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.OWNER)
    return ProjectInvitation.objects.filter(project=project).select_related("created_by", "accepted_by")


def invitation_by_token(*, token: object, now: datetime, lock: bool = False) -> ProjectInvitation:
    """The pending invitation whose token is ``token``; ``InvitationNotFound`` (with its reason) otherwise."""
    if not isinstance(token, str) or not token or len(token) > MAX_INVITATION_TOKEN_CHARS:
        raise InvitationNotFound()
    if input_problem(token) is not None:
        raise InvitationNotFound()
    # FOR UPDATE OF cannot name the schema-qualified tables, so a locking read joins nothing.
    qs = (
        ProjectInvitation.objects.select_for_update()
        if lock
        else ProjectInvitation.objects.select_related("project", "created_by")
    )
    invitation = qs.filter(token_hash=token_hash(token)).first()
    if invitation is None:
        raise InvitationNotFound()
    status = invitation.status_at(now)
    if status in INVITATION_GONE:
        message, code = INVITATION_GONE[InvitationStatus(status)]
        raise InvitationNotFound(message, code=code)
    return invitation


def invitation_preview(
    *, principal: Principal, token: object, now: datetime | None = None
) -> InvitationPreview:
    """What accepting ``token`` would do for the principal (for the page that asks them to accept)."""
    invitation = invitation_by_token(token=token, now=now or timezone.now())
    current = project_role(principal=principal, project=invitation.project)
    raises = current is None or ROLE_RANK[Role(current)] < ROLE_RANK[Role(invitation.role)]
    return InvitationPreview(invitation=invitation, current_role=current, would_change=raises)


@dataclass(frozen=True)
class InvitationPreview:
    invitation: ProjectInvitation
    current_role: str | None
    would_change: bool

"""Writes about projects, memberships and API tokens."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from apps.core.errors import NotFound, PermissionDenied, ServiceError
from apps.core.inputs import InvalidInput, input_check
from apps.projects.models import ApiToken, Project, ProjectInvitation, ProjectMembership, Role
from apps.projects.selectors import (
    ROLE_RANK,
    InvitationNotFound,
    Principal,
    RoleTooLow,
    invitation_by_token,
    member_get,
    parse_user_id,
    parse_uuid,
    project_get,
    project_role,
    token_hash,
)

TOKEN_PREFIX = "kgc_"


def _unique_slug(name: str) -> str:
    base = slugify(name)[:80] or "project"
    slug, n = base, 2
    while Project.objects.filter(slug=slug).exists():
        slug, n = f"{base}-{n}", n + 1
    return slug


MAX_NAME = Project._meta.get_field("name").max_length or 200
MAX_SLUG = Project._meta.get_field("slug").max_length or 100
MAX_TOKEN_NAME = ApiToken._meta.get_field("name").max_length or 100
SLUG_PATTERN = re.compile(r"[-a-zA-Z0-9_]+")


def _checked_slug(slug: str) -> str:
    """A slug that can address the project in a URL path segment: ASCII letters, digits, ``-``, ``_``.

    A slug that reads as a UUID is refused too: a reference that parses as one is looked up as an id.
    """
    if len(slug) > MAX_SLUG:
        raise InvalidInput(f"slug is longer than {MAX_SLUG} characters", field="slug")
    if not SLUG_PATTERN.fullmatch(slug) or parse_uuid(slug) is not None:
        raise InvalidInput(
            "slug must be ASCII letters, digits, '-' or '_' (and not a UUID)",
            field="slug",
        )
    return slug


@transaction.atomic
def project_create(*, owner: User, name: str, slug: str | None = None) -> Project:
    """Create a project and make ``owner`` its owner."""
    input_check(name, field="name")
    name = name.strip()
    if not name:
        raise InvalidInput("name must not be empty", field="name")
    if len(name) > MAX_NAME:
        raise InvalidInput(f"name is longer than {MAX_NAME} characters", field="name")
    if slug:
        input_check(slug, field="slug")
        slug = _checked_slug(slug)
    if slug and Project.objects.filter(slug=slug).exists():
        raise ServiceError(f"slug {slug!r} is taken", code="slug_taken", status=409)
    project = Project.objects.create(name=name, slug=slug or _unique_slug(name))
    ProjectMembership.objects.create(project=project, user=owner, role=Role.OWNER)
    return project


def project_delete(*, project: Project) -> None:
    """Delete a project and everything in it (operators' tools: the eval's throwaway projects)."""
    Project.objects.filter(id=project.id).delete()


def membership_set(*, project: Project, user: User, role: str) -> ProjectMembership:
    """Give ``user`` the ``role`` in ``project`` (creating or changing the membership)."""
    membership, _ = ProjectMembership.objects.update_or_create(
        project=project, user=user, defaults={"role": Role(role)}
    )
    return membership


def api_token_create(*, user: User, project: Project | None = None, name: str = "") -> tuple[ApiToken, str]:
    """Create an API token; return it with its secret, which is not stored and cannot be shown again."""
    input_check(name, field="name")
    if len(name) > MAX_TOKEN_NAME:
        raise InvalidInput(f"name: at most {MAX_TOKEN_NAME} characters", field="name")
    if project is not None and not ProjectMembership.objects.filter(project=project, user=user).exists():
        raise ServiceError("the user is not a member of that project", code="not_a_member")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, project=project, name=name, prefix=secret[:12], token_hash=token_hash(secret)
    )
    return token, secret


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


# --- members and roles ---------------------------------------------------------------------------


class UserNotFound(NotFound):
    """no user with that username or e-mail"""

    code = "user_not_found"


class LastOwner(ServiceError):
    """a project must keep at least one owner: make someone else owner first"""

    status = 409
    code = "last_owner"


class AlreadyMember(ServiceError):
    status = 409
    code = "already_member"


MAX_USER_LOOKUP_CHARS = 254


def _checked_role(role: object, *, field: str = "role") -> Role:
    if isinstance(role, str) and role in Role.values:
        return Role(role)
    raise InvalidInput(f"{field} must be one of {', '.join(Role.values)}", field=field)


def _lock_project(project: Project) -> None:
    """Serialise membership changes of one project (so two owners cannot each demote the other)."""
    Project.objects.select_for_update().filter(pk=project.pk).first()


def _owner_count(project: Project) -> int:
    return ProjectMembership.objects.filter(project=project, role=Role.OWNER).count()


def _user_lookup(*, username: str | None, email: str | None) -> User:
    if (username is None) == (email is None):
        raise InvalidInput("name the user by exactly one of username or email", field="username")
    field, value = ("username", username) if username is not None else ("email", email)
    assert value is not None
    input_check(value, field=field)
    value = value.strip()
    if not value or len(value) > MAX_USER_LOOKUP_CHARS:
        raise InvalidInput(f"{field} must be 1 to {MAX_USER_LOOKUP_CHARS} characters", field=field)
    users = User.objects.filter(is_active=True)
    if field == "username":
        # Usernames are case-insensitive here; one spelled exactly as typed wins over its case variants
        # (Django lets "Ana" and "ana" both exist), and several variants without one are ambiguous.
        exact = users.filter(username=value).first()
        matches = [exact] if exact is not None else list(users.filter(username__iexact=value)[:2])
    else:
        matches = list(users.filter(email__iexact=value)[:2])
    if not matches:
        raise UserNotFound(f"no user with that {field}")
    if len(matches) > 1:
        if field == "username":
            raise ServiceError(
                "several users have that username in other cases: type it exactly", code="ambiguous_username"
            )
        raise ServiceError(
            "several users have that e-mail address: name the user by username", code="ambiguous_email"
        )
    return matches[0]


@transaction.atomic
def member_add(
    *,
    principal: Principal,
    project_ref: object,
    role: str,
    username: str | None = None,
    email: str | None = None,
) -> ProjectMembership:
    """Make an existing user (by username or e-mail) a member with ``role``; owners only."""
    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.OWNER)
    checked = _checked_role(role)
    user = _user_lookup(username=username, email=email)
    _lock_project(project)
    current = project_role(principal=Principal(user=user), project=project)
    if current is not None:
        raise AlreadyMember(
            f"{user.get_username()} is already {current} in this project: change their role instead"
        )
    return ProjectMembership.objects.create(project=project, user=user, role=checked)


@transaction.atomic
def member_role_set(
    *, principal: Principal, project_ref: object, user_id: object, role: str
) -> ProjectMembership:
    """Change a member's role; owners only. The last owner cannot be demoted."""
    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.OWNER)
    checked = _checked_role(role)
    _lock_project(project)
    membership = member_get(project=project, user_ref=user_id)
    if membership.role == Role.OWNER and checked != Role.OWNER and _owner_count(project) <= 1:
        raise LastOwner()
    if membership.role != checked:
        membership.role = checked
        membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def member_remove(*, principal: Principal, project_ref: object, user_id: object) -> None:
    """Remove a member: owners remove anyone, every member may remove themselves (leave).

    The last owner can do neither. The removed user's API tokens bound to this project are revoked,
    so no transport (REST, websocket, MCP) keeps serving them the project.
    """
    project = project_get(principal=principal, project_ref=project_ref)
    leaving = parse_user_id(user_id) == principal.user_id
    if not leaving:
        role = project_role(principal=principal, project=project)
        if role != Role.OWNER:
            raise RoleTooLow(Role.OWNER)
    _lock_project(project)
    membership = member_get(project=project, user_ref=user_id)
    if membership.role == Role.OWNER and _owner_count(project) <= 1:
        raise LastOwner("the last owner cannot leave or be removed: make someone else owner first")
    ApiToken.objects.filter(user_id=membership.user_id, project=project, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    membership.delete()


# --- invitations ---------------------------------------------------------------------------------

INVITATION_TOKEN_PREFIX = "kgi_"
MAX_INVITATION_HOURS = 365 * 24
MAX_PENDING_INVITATIONS = 100


@dataclass(frozen=True)
class InvitationAccepted:
    project: Project
    role: str


def _hours(value: object) -> int:
    if value is None:
        return int(settings.KGCHAT_INVITATION_TTL_HOURS)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_INVITATION_HOURS:
        raise InvalidInput(
            f"expiresInHours must be a whole number from 1 to {MAX_INVITATION_HOURS}", field="expiresInHours"
        )
    return value


@transaction.atomic
def invitation_create(
    *,
    principal: Principal,
    project_ref: object,
    role: str,
    expires_in_hours: int | None = None,
    now: datetime | None = None,
) -> tuple[ProjectInvitation, str]:
    """Create a single-use invitation link; owners only. Returns it with its token, shown this once."""
    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.OWNER)
    checked = _checked_role(role)
    hours = _hours(expires_in_hours)
    now = now or timezone.now()
    _lock_project(project)
    pending = ProjectInvitation.objects.filter(
        project=project, accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=now
    ).count()
    if pending >= MAX_PENDING_INVITATIONS:
        raise ServiceError(
            f"this project has {MAX_PENDING_INVITATIONS} pending invitations: revoke some first",
            code="too_many_invitations",
            status=409,
        )
    token = INVITATION_TOKEN_PREFIX + secrets.token_urlsafe(32)
    invitation = ProjectInvitation.objects.create(
        project=project,
        role=checked,
        token_hash=token_hash(token),
        created_by=principal.user,
        expires_at=now + timedelta(hours=hours),
    )
    return invitation, token


@transaction.atomic
def invitation_revoke(
    *, principal: Principal, project_ref: object, invitation_id: object
) -> ProjectInvitation:
    """Revoke an invitation that has not been used; owners only. Revoking twice changes nothing."""
    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.OWNER)
    pk = parse_uuid(invitation_id)
    invitation = (
        ProjectInvitation.objects.select_for_update().filter(project=project, pk=pk).first() if pk else None
    )
    if invitation is None:
        raise InvitationNotFound()
    if invitation.accepted_at is not None:
        raise ServiceError(
            "this invitation has already been used: remove the member instead",
            code="invitation_used",
            status=409,
        )
    return invitation_mark_revoked(invitation=invitation)


def invitation_mark_revoked(*, invitation: ProjectInvitation) -> ProjectInvitation:
    """Revoke an unused invitation without access checks (operators: the admin action)."""
    if invitation.revoked_at is None and invitation.accepted_at is None:
        invitation.revoked_at = timezone.now()
        invitation.save(update_fields=["revoked_at"])
    return invitation


@transaction.atomic
def invitation_accept(
    *, principal: Principal, token: object, now: datetime | None = None
) -> InvitationAccepted:
    """Accept an invitation: join its project with its role, or rise to it; never lower a role.

    Someone who already has that role or a higher one gets ``409 already_member`` and the
    invitation stays unused, for the person it was meant for.
    """
    now = now or timezone.now()
    invitation = invitation_by_token(token=token, now=now, lock=True)
    project = invitation.project
    if principal.token_project_id is not None and principal.token_project_id != project.id:
        raise PermissionDenied("an API token bound to one project cannot join another")
    _lock_project(project)
    membership = ProjectMembership.objects.filter(project=project, user_id=principal.user_id).first()
    if membership is not None and ROLE_RANK[Role(membership.role)] >= ROLE_RANK[Role(invitation.role)]:
        raise AlreadyMember(
            f"you already are {membership.role} in this project; the invitation stays unused for someone else"
        )
    if membership is None:
        membership = ProjectMembership.objects.create(
            project=project, user=principal.user, role=invitation.role
        )
    else:
        membership.role = invitation.role
        membership.save(update_fields=["role"])
    invitation.accepted_at = now
    invitation.accepted_by = principal.user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    return InvitationAccepted(project=project, role=membership.role)

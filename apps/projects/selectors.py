"""Reads about projects and access. Every lookup is scoped to what the principal may see."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.db.models import QuerySet

from apps.projects.errors import NotFound, PermissionDenied
from apps.projects.models import ApiToken, Project, ProjectMembership, Role


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
            raise PermissionDenied(f"this needs the {min_role} role in the project", code="forbidden")
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


def principal_from_token(*, secret: str) -> Principal | None:
    """Return the principal of an active API token, or None."""
    if not secret:
        return None
    token = (
        ApiToken.objects.select_related("user")
        .filter(token_hash=token_hash(secret), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
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

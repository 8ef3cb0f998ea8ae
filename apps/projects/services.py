"""Writes about projects, memberships and API tokens."""

from __future__ import annotations

import re
import secrets

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from apps.projects.errors import ServiceError
from apps.projects.inputs import InvalidInput, input_check
from apps.projects.models import ApiToken, Project, ProjectMembership, Role
from apps.projects.selectors import parse_uuid, token_hash

TOKEN_PREFIX = "kgc_"


def _unique_slug(name: str) -> str:
    base = slugify(name)[:80] or "project"
    slug, n = base, 2
    while Project.objects.filter(slug=slug).exists():
        slug, n = f"{base}-{n}", n + 1
    return slug


MAX_NAME = Project._meta.get_field("name").max_length or 200
MAX_SLUG = Project._meta.get_field("slug").max_length or 100
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


def membership_set(*, project: Project, user: User, role: str) -> ProjectMembership:
    """Give ``user`` the ``role`` in ``project`` (creating or changing the membership)."""
    membership, _ = ProjectMembership.objects.update_or_create(
        project=project, user=user, defaults={"role": Role(role)}
    )
    return membership


def api_token_create(*, user: User, project: Project | None = None, name: str = "") -> tuple[ApiToken, str]:
    """Create an API token; return it with its secret, which is not stored and cannot be shown again."""
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

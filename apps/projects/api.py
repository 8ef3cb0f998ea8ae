"""REST routes for projects (PROTOCOL §2)."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.http import HttpRequest
from ninja import Router, Schema, Status

from apps.projects import selectors, services
from apps.projects.auth import principal_of
from apps.projects.inputs import ListLimit, ListOffset

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
    page = rows[offset : offset + max(0, min(limit, 500))]
    return ProjectList(items=[_project_out(p, role) for p, role in page], count=len(rows))


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

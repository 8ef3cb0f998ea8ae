"""Reads of curation (#51): a project's change sets of both kinds."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.core.errors import ServiceError
from apps.documents.models import ChangeSet, ChangeSetKind, ExtractionStatus
from apps.projects.selectors import Principal, project_get


def change_set_list(
    *, principal: Principal, project_ref: object, kind: str | None = None, status: str | None = None
) -> QuerySet[ChangeSet]:
    """A project's change sets, newest first, of one kind and/or status (the caller pages them)."""
    project = project_get(principal=principal, project_ref=project_ref)
    if kind and kind not in ChangeSetKind.values:
        raise ServiceError(f"kind must be one of: {', '.join(ChangeSetKind.values)}", code="invalid_request")
    if status and status not in ExtractionStatus.values:
        raise ServiceError(
            f"status must be one of: {', '.join(ExtractionStatus.values)}", code="invalid_request"
        )
    qs = ChangeSet.objects.filter(project=project).select_related("document", "requested_by")
    if kind:
        qs = qs.filter(kind=kind)
    if status:
        qs = qs.filter(status=status)
    return qs.prefetch_related("items").order_by("-created_at", "id")

"""REST routes of a project's ontology (#51; docs/protocol.md "Ontology"): import, get, the
enforcement setting, delete, export of the schema the graph has, the draft's acceptance, and the
ontology-violations queue. Each makes one call into the ontology's services or selectors. The
draft's own path (request, read, discard) is one router's, ``apps/documents/ontology_api.py``:
Django resolves a path to the first router that has it, whatever the method."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema
from pydantic import Field

from apps.graph_tools.errors import OntologyTooLarge
from apps.graph_tools.models import ProjectOntology
from apps.graph_tools.ontology import queue, selectors, services
from apps.graph_tools.ontology.formats import (
    CONTENT_TYPES,
    MAX_BYTES,
    ontology_write,
)
from apps.graph_tools.ontology.selectors import ontology_of_row
from apps.projects.auth import principal_of

router = Router(tags=["ontology"])

Format = Literal["yaml", "json", "turtle"]
Enforcement = Literal["refuse", "flag"]


class OntologyOut(Schema):
    # The document as a JSON object: entity_types, relationship_types (the file's shape).
    ontology: dict[str, Any]
    # How a write that breaks it is treated: "refuse" (400 ontology_violation) or "flag" (for review).
    onViolation: str
    updatedAt: datetime
    updatedBy: str | None


class EnforcementIn(Schema):
    onViolation: Enforcement


class DraftOut(Schema):
    draft: dict[str, Any]
    notes: str
    proposedAt: datetime | None


def ontology_out(row: ProjectOntology) -> OntologyOut:
    ontology = ontology_of_row(row)
    assert ontology is not None
    return OntologyOut(
        ontology=ontology.as_document(with_setting=False),
        onViolation=row.on_violation,
        updatedAt=row.updated_at,
        updatedBy=row.updated_by.get_username() if row.updated_by else None,
    )


def _upload(request: HttpRequest) -> tuple[bytes, str, str]:
    """The file sent (multipart ``file``, or the raw body), its content type and name."""
    content_type = request.content_type or ""
    try:
        if content_type.startswith("multipart/form-data"):
            upload = request.FILES.get("file")
            if upload is None:
                return b"", "", ""
            if upload.size is not None and upload.size > MAX_BYTES:
                raise OntologyTooLarge(f"the ontology file is larger than {MAX_BYTES} bytes")
            return upload.read(MAX_BYTES + 1), upload.content_type or "", upload.name or ""
        return request.body, content_type, ""
    except RequestDataTooBig:
        raise OntologyTooLarge(f"the ontology file is larger than {MAX_BYTES} bytes") from None


@router.post("/projects/{project_id}/ontology/import", response=OntologyOut)
def ontology_import(
    request: HttpRequest,
    project_id: str,
    format: Format | None = None,
    onViolation: Enforcement | None = None,
) -> OntologyOut:
    body, content_type, filename = _upload(request)
    row = services.ontology_import(
        principal=principal_of(request),
        project_ref=project_id,
        data=body,
        asked_format=format,
        content_type=content_type,
        filename=filename,
        on_violation=onViolation,
    )
    return ontology_out(row)


@router.get("/projects/{project_id}/ontology", response=OntologyOut)
def ontology_get(request: HttpRequest, project_id: str) -> OntologyOut:
    state = selectors.ontology_get(principal=principal_of(request), project_ref=project_id)
    assert state.row is not None
    return ontology_out(state.row)


@router.patch("/projects/{project_id}/ontology", response=OntologyOut)
def ontology_enforcement(request: HttpRequest, project_id: str, payload: EnforcementIn) -> OntologyOut:
    row = services.ontology_enforcement_set(
        principal=principal_of(request), project_ref=project_id, on_violation=payload.onViolation
    )
    return ontology_out(row)


@router.delete("/projects/{project_id}/ontology", response={204: None})
def ontology_delete(request: HttpRequest, project_id: str) -> tuple[int, None]:
    services.ontology_delete(principal=principal_of(request), project_ref=project_id)
    return 204, None


@router.get("/projects/{project_id}/ontology/export")
def ontology_export(request: HttpRequest, project_id: str, format: Format = "yaml") -> HttpResponse:
    schema = selectors.graph_schema_export(principal=principal_of(request), project_ref=project_id)
    response = HttpResponse(
        ontology_write(schema, format, with_setting=False),
        content_type=f"{CONTENT_TYPES[format]}; charset=utf-8",
    )
    suffix = {"yaml": "yaml", "json": "json", "turtle": "ttl"}[format]
    response["Content-Disposition"] = f'attachment; filename="ontology.{suffix}"'
    return response


@router.post("/projects/{project_id}/ontology/draft/accept", response=OntologyOut)
def ontology_draft_accept(request: HttpRequest, project_id: str) -> OntologyOut:
    return ontology_out(
        services.ontology_draft_accept(principal=principal_of(request), project_ref=project_id)
    )


@router.get("/projects/{project_id}/curation/queues/ontology-violations", response=dict[str, Any])
def ontology_violations(
    request: HttpRequest,
    project_id: str,
    cursor: Annotated[str | None, Field(max_length=1000)] = None,
    limit: Annotated[int, Field(ge=1, le=queue.MAX_LIMIT)] = queue.DEFAULT_LIMIT,
) -> dict[str, Any]:
    page = queue.violations_page_for(
        principal=principal_of(request), project_ref=project_id, cursor=cursor, limit=limit
    )
    return page.as_json()

"""REST routes for a project's documents (PROTOCOL §2 "Documents"): upload, list, read, delete."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.http import HttpRequest
from ninja import File, Form, Router, Schema, Status
from ninja.files import UploadedFile

from apps.core.inputs import ListLimit, ListOffset
from apps.core.paging import page_of
from apps.graph_tools.documents import selectors, services
from apps.graph_tools.documents.errors import DocumentTooLarge
from apps.graph_tools.models import Document, Passage
from apps.projects.auth import principal_of

router = Router(tags=["documents"])


class DocumentOut(Schema):
    id: uuid.UUID
    projectId: uuid.UUID
    name: str
    format: str
    contentHash: str
    sizeBytes: int
    pages: int | None
    passages: int
    # Passages still waiting for the background worker's vector (found by full text meanwhile).
    passagesPending: int
    createdAt: datetime
    updatedAt: datetime


class DocumentList(Schema):
    items: list[DocumentOut]
    count: int


class UploadOut(Schema):
    document: DocumentOut
    # false: the document already held exactly these bytes and nothing was written
    changed: bool
    created: bool
    passagesKept: int
    passagesAdded: int
    passagesRemoved: int


class PassageOut(Schema):
    id: uuid.UUID
    documentId: uuid.UUID
    ordinal: int
    text: str
    charStart: int
    charEnd: int
    page: int | None
    contentHash: str
    embedded: bool


class PassageList(Schema):
    items: list[PassageOut]
    count: int


def document_out(document: Document) -> DocumentOut:
    return DocumentOut(
        id=document.id,
        projectId=document.project_id,
        name=document.name,
        format=document.format,
        contentHash=document.content_hash,
        sizeBytes=document.size_bytes,
        pages=document.page_count,
        passages=getattr(document, "passage_count", 0),
        passagesPending=getattr(document, "passages_pending", 0),
        createdAt=document.created_at,
        updatedAt=document.updated_at,
    )


def passage_out(passage: Passage) -> PassageOut:
    return PassageOut(
        id=passage.id,
        documentId=passage.document_id,
        ordinal=passage.ordinal,
        text=passage.text,
        charStart=passage.char_start,
        charEnd=passage.char_end,
        page=passage.page,
        contentHash=passage.content_hash,
        embedded=not passage.embedding_pending,
    )


@router.post("/projects/{project_id}/documents", response={200: UploadOut, 201: UploadOut})
def upload_document(
    request: HttpRequest, project_id: str, file: File[UploadedFile], name: Form[str | None] = None
) -> Status:
    # Checked before the bytes are read: Django has spooled a large file to disk, not into memory.
    if file.size is not None and file.size > settings.KGCHAT_DOCUMENT_MAX_BYTES:
        raise DocumentTooLarge(
            f"the file has {file.size} bytes; at most {settings.KGCHAT_DOCUMENT_MAX_BYTES} are accepted"
        )
    result = services.document_upload_as_member(
        principal=principal_of(request),
        project_ref=project_id,
        name=name if name is not None else (file.name or ""),
        data=file.read(),
        content_type=file.content_type or "",
    )
    document = selectors.document_of_project(
        project_id=result.document.project_id, document_id=result.document.id
    )
    out = UploadOut(
        document=document_out(document),
        changed=result.changed,
        created=result.created,
        passagesKept=result.passages_kept,
        passagesAdded=result.passages_added,
        passagesRemoved=result.passages_removed,
    )
    return Status(201 if result.created else 200, out)


@router.get("/projects/{project_id}/documents", response=DocumentList)
def list_documents(
    request: HttpRequest, project_id: str, limit: ListLimit = 100, offset: ListOffset = 0
) -> DocumentList:
    qs = selectors.document_list(principal=principal_of(request), project_ref=project_id)
    page = page_of(qs, limit=limit, offset=offset)
    return DocumentList(items=[document_out(d) for d in page.items], count=page.count)


@router.get("/projects/{project_id}/documents/{document_id}", response=DocumentOut)
def get_document(request: HttpRequest, project_id: str, document_id: str) -> DocumentOut:
    return document_out(
        selectors.document_get(
            principal=principal_of(request), project_ref=project_id, document_id=document_id
        )
    )


@router.get("/projects/{project_id}/documents/{document_id}/passages", response=PassageList)
def list_passages(
    request: HttpRequest, project_id: str, document_id: str, limit: ListLimit = 100, offset: ListOffset = 0
) -> PassageList:
    found = selectors.passage_list(
        principal=principal_of(request), project_ref=project_id, document_id=document_id
    )
    page = page_of(found.passages, limit=limit, offset=offset)
    return PassageList(items=[passage_out(p) for p in page.items], count=page.count)


@router.delete("/projects/{project_id}/documents/{document_id}", response={204: None})
def delete_document(request: HttpRequest, project_id: str, document_id: str) -> Status:
    services.document_delete_as_member(
        principal=principal_of(request), project_ref=project_id, document_id=document_id
    )
    return Status(204, None)

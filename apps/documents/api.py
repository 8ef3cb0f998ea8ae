"""REST routes for a project's documents (PROTOCOL §2 "Documents"): upload, list, read, delete."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from django.conf import settings
from django.http import HttpRequest
from ninja import File, Form, Router, Schema, Status
from ninja.files import UploadedFile
from pydantic import Field

from apps.core.inputs import ListLimit, ListOffset
from apps.core.paging import page_of
from apps.core.uploads import client_file_name
from apps.documents import review, selectors, services
from apps.documents.errors import DocumentTooLarge
from apps.documents.extraction import services as extraction
from apps.documents.extraction.queue import change_set_progress
from apps.documents.models import ChangeSet, ChangeSetItem, ChangeSetKind, Document, Passage, PassageMention
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
    # Read by OCR (a scanned page, an image): the engine's mean word confidence, 0 to 1; else null.
    ocrConfidence: float | None
    contentHash: str
    embedded: bool


class PassageList(Schema):
    items: list[PassageOut]
    count: int


class MentionOut(Schema):
    id: int
    passageId: uuid.UUID
    surface: str
    kind: str
    charStart: int
    charEnd: int
    normalised: str
    nameId: uuid.UUID
    entityId: uuid.UUID | None


class MentionList(Schema):
    items: list[MentionOut]
    count: int


def mention_out(mention: PassageMention) -> MentionOut:
    return MentionOut(
        id=mention.id,
        passageId=mention.passage_id,
        surface=mention.surface,
        kind=mention.kind,
        charStart=mention.char_start,
        charEnd=mention.char_end,
        normalised=mention.mention_name.normalised,
        nameId=mention.mention_name_id,
        entityId=mention.mention_name.entity_id,
    )


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
        ocrConfidence=passage.ocr_confidence,
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
        name=name if name is not None else client_file_name(request, "file", file),
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


@router.get("/projects/{project_id}/documents/{document_id}/mentions", response=MentionList)
def list_mentions(
    request: HttpRequest, project_id: str, document_id: str, limit: ListLimit = 100, offset: ListOffset = 0
) -> MentionList:
    found = selectors.mention_list(
        principal=principal_of(request), project_ref=project_id, document_id=document_id
    )
    page = page_of(found.mentions, limit=limit, offset=offset)
    return MentionList(items=[mention_out(m) for m in page.items], count=page.count)


@router.delete("/projects/{project_id}/documents/{document_id}", response={204: None})
def delete_document(request: HttpRequest, project_id: str, document_id: str) -> Status:
    services.document_delete_as_member(
        principal=principal_of(request), project_ref=project_id, document_id=document_id
    )
    return Status(204, None)


# --- extraction and review -------------------------------------------------------------------------


class ProgressOut(Schema):
    total: int
    done: int
    failed: int
    pending: int


class ChangeSetItemOut(Schema):
    id: int
    action: str
    status: str
    values: dict[str, Any]
    entityId: uuid.UUID | None
    evidence: dict[str, Any]
    passageId: uuid.UUID | None
    result: Any


class ChangeSetOut(Schema):
    id: uuid.UUID
    projectId: uuid.UUID
    # "extraction" (of a document) or "curation" (a member's edits, #51: no document)
    kind: str
    documentId: uuid.UUID | None
    documentName: str | None
    summary: str
    # The change set whose inverse this one proposes (an undo), else null.
    undoes: uuid.UUID | None
    requestedBy: str | None
    status: str
    model: str
    progress: ProgressOut
    autoApprove: bool
    graphVersion: int | None
    decidedAt: datetime | None
    createdAt: datetime
    items: list[ChangeSetItemOut]


class DecisionIn(Schema):
    approve: Literal["all"] | list[int] = Field(default_factory=list)
    reject: list[int] = Field(default_factory=list)
    edits: dict[int, dict[str, str]] = Field(default_factory=dict)


class ExtractionSettingsIn(Schema):
    allowNewTypes: bool | None = None
    ownersAutoApprove: bool | None = None


class ExtractionSettingsOut(Schema):
    allowNewTypes: bool
    ownersAutoApprove: bool


def _item_values(change_set: ChangeSet, item: ChangeSetItem, names: dict[int, Any]) -> dict[str, Any]:
    """An item's values; an extraction's relationship also with its ends' names (its values name
    them by their items' ordinals)."""
    if change_set.kind != ChangeSetKind.EXTRACTION or item.action != "create_relationship":
        return item.values
    return {
        **item.values,
        "sourceName": names.get(item.values["source"]),
        "targetName": names.get(item.values["target"]),
    }


def change_set_out(change_set: ChangeSet) -> ChangeSetOut:
    progress = change_set_progress(change_set)
    items = list(change_set.items.all())
    names = {i.ordinal: i.values.get("name") for i in items if i.action.endswith("_entity")}
    return ChangeSetOut(
        id=change_set.id,
        projectId=change_set.project_id,
        kind=change_set.kind,
        documentId=change_set.document_id,
        documentName=change_set.document.name if change_set.document is not None else None,
        summary=change_set.summary,
        undoes=change_set.undoes_id,
        requestedBy=change_set.requested_by.get_username() if change_set.requested_by else None,
        status=change_set.status,
        model=change_set.model,
        progress=ProgressOut(
            total=progress.total, done=progress.done, failed=progress.failed, pending=progress.pending
        ),
        autoApprove=change_set.auto_approve,
        graphVersion=change_set.graph_version,
        decidedAt=change_set.decided_at,
        createdAt=change_set.created_at,
        items=[
            ChangeSetItemOut(
                id=i.id,
                action=i.action,
                status=i.status,
                values=_item_values(change_set, i, names),
                entityId=i.entity_id,
                evidence=i.evidence,
                passageId=i.passage_id,
                result=i.result,
            )
            for i in items
        ],
    )


@router.post("/projects/{project_id}/documents/{document_id}/extraction", response={202: ChangeSetOut})
def start_extraction(request: HttpRequest, project_id: str, document_id: str) -> Status:
    change_set = extraction.extraction_start_as_member(
        principal=principal_of(request), project_ref=project_id, document_id=document_id
    )
    return Status(202, change_set_out(change_set))


@router.get("/projects/{project_id}/documents/{document_id}/extraction", response=ChangeSetOut)
def get_extraction(request: HttpRequest, project_id: str, document_id: str) -> ChangeSetOut:
    return change_set_out(
        extraction.change_set_latest(
            principal=principal_of(request), project_ref=project_id, document_id=document_id
        )
    )


@router.get("/change-sets/{change_set_id}", response=ChangeSetOut)
def get_change_set(request: HttpRequest, change_set_id: str) -> ChangeSetOut:
    return change_set_out(review.change_set_get(principal=principal_of(request), change_set_id=change_set_id))


@router.post("/change-sets/{change_set_id}/decision", response=ChangeSetOut)
def decide_change_set(request: HttpRequest, change_set_id: str, payload: DecisionIn) -> ChangeSetOut:
    change_set = review.change_set_decide(
        principal=principal_of(request),
        change_set_id=change_set_id,
        approve=None if payload.approve == "all" else list(payload.approve),
        reject=payload.reject,
        edits=payload.edits,
    )
    return change_set_out(change_set)


@router.get("/projects/{project_id}/extraction-settings", response=ExtractionSettingsOut)
def get_extraction_settings(request: HttpRequest, project_id: str) -> ExtractionSettingsOut:
    row = extraction.extraction_settings_get(principal=principal_of(request), project_ref=project_id)
    return ExtractionSettingsOut(allowNewTypes=row.allow_new_types, ownersAutoApprove=row.owners_auto_approve)


@router.put("/projects/{project_id}/extraction-settings", response=ExtractionSettingsOut)
def set_extraction_settings(
    request: HttpRequest, project_id: str, payload: ExtractionSettingsIn
) -> ExtractionSettingsOut:
    row = extraction.extraction_settings_set(
        principal=principal_of(request),
        project_ref=project_id,
        allow_new_types=payload.allowNewTypes,
        owners_auto_approve=payload.ownersAutoApprove,
    )
    return ExtractionSettingsOut(allowNewTypes=row.allow_new_types, ownersAutoApprove=row.owners_auto_approve)

"""Upload and delete documents: read the file, split it into passages, store them in one transaction.

A document is named within its project. Uploading a name again with the same bytes changes nothing;
with other bytes, every passage whose text is unchanged (by content hash) is kept with its vector
(only its position is updated), new passages are added (waiting for the background embedding
worker) and those no longer in the file are removed. Nothing is stored when the file cannot be read.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction

from apps.core.inputs import InvalidInput, input_check
from apps.documents.errors import DocumentNotFound, DocumentTooLarge
from apps.documents.mention_index import (
    mention_names_of_passages,
    mention_names_prune,
    passages_mentions_index,
)
from apps.documents.models import Document, Passage
from apps.documents.parsed import ParseLimits
from apps.documents.parsing import document_parse, format_detect
from apps.documents.passages import PassageSpan, passages_split
from apps.projects.models import Project, Role
from apps.projects.selectors import Principal, parse_uuid, project_get, project_get_by_ref

MAX_NAME = 300


@dataclass(frozen=True)
class UploadResult:
    document: Document
    # False: the same name already held exactly these bytes; nothing was written.
    changed: bool
    created: bool
    passages_kept: int = 0
    passages_added: int = 0
    passages_removed: int = 0
    added_ids: list[uuid.UUID] = field(default_factory=list)


def document_name_clean(name: str) -> str:
    """A document's name: the file name without folders, 1 to ``MAX_NAME`` characters."""
    input_check(name, field="name")
    cleaned = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    if not cleaned:
        raise InvalidInput("name: a document needs a name (the file's name, or the name field)", field="name")
    if len(cleaned) > MAX_NAME:
        raise InvalidInput(f"name: at most {MAX_NAME} characters", field="name")
    return cleaned


def parse_limits() -> ParseLimits:
    """The limits of a file's contents, from the settings (``KGCHAT_DOCUMENT_MAX_*``)."""
    return ParseLimits(
        pages=settings.KGCHAT_DOCUMENT_MAX_PAGES,
        ocr_pages=settings.KGCHAT_DOCUMENT_MAX_OCR_PAGES,
        sheets=settings.KGCHAT_DOCUMENT_MAX_SHEETS,
        rows=settings.KGCHAT_DOCUMENT_MAX_ROWS,
        ocr_languages=settings.KGCHAT_OCR_LANGUAGES,
    )


def _passages_replace(
    project: Project, document: Document, spans: list[PassageSpan], *, created: bool
) -> tuple[list[Passage], list[Passage], list[uuid.UUID]]:
    """Make the document's passages ``spans``: a passage whose text is unchanged is kept (with its
    vector and extraction), moved to its new place; the others are added or removed. Returns the
    kept, the added and the removed ids."""
    old: dict[str, list[Passage]] = defaultdict(list)
    if not created:
        for passage in (
            Passage.objects.filter(document=document).defer("text", "search_vector").order_by("ordinal")
        ):
            old[passage.content_hash].append(passage)
    kept: list[Passage] = []
    new: list[Passage] = []
    for span in spans:
        same = old.get(span.content_hash)
        if same:
            passage = same.pop(0)
            passage.ordinal, passage.char_start, passage.char_end, passage.page = (
                span.ordinal,
                span.start,
                span.end,
                span.page,
            )
            passage.ocr_confidence = span.ocr_confidence
            kept.append(passage)
        else:
            new.append(
                Passage(
                    project=project,
                    document=document,
                    ordinal=span.ordinal,
                    text=span.text,
                    content_hash=span.content_hash,
                    char_start=span.start,
                    char_end=span.end,
                    page=span.page,
                    ocr_confidence=span.ocr_confidence,
                )
            )
    removed = [p.id for rest in old.values() for p in rest]
    if removed:
        names = mention_names_of_passages(passage_ids=removed)
        Passage.objects.filter(id__in=removed).delete()
        mention_names_prune(project_id=project.id, name_ids=names)
    if kept:
        # Ordinals are not unique, so a kept passage may take a number another held a moment ago.
        Passage.objects.bulk_update(
            kept, ["ordinal", "char_start", "char_end", "page", "ocr_confidence"], batch_size=500
        )
    Passage.objects.bulk_create(new, batch_size=500)
    passages_mentions_index(project_id=project.id, passages=new)
    return kept, new, removed


def document_upload(
    *,
    project: Project,
    name: str,
    data: bytes,
    content_type: str = "",
    user_id: int | None = None,
) -> UploadResult:
    """Store ``data`` as the project's document ``name`` (a new one, or a new version of it).

    Raises a ``DocumentError`` (unsupported type, too large, too many pages, sheets or rows,
    encrypted, corrupt, without text, OCR unavailable) before anything is written.
    """
    name = document_name_clean(name)
    max_bytes = settings.KGCHAT_DOCUMENT_MAX_BYTES
    if len(data) > max_bytes:
        raise DocumentTooLarge(f"the file has {len(data)} bytes; at most {max_bytes} are accepted")
    content_hash = hashlib.sha256(data).hexdigest()
    existing = Document.objects.filter(project=project, name=name).defer("text").first()
    if existing is not None and existing.content_hash == content_hash:
        return UploadResult(document=existing, changed=False, created=False)
    fmt = format_detect(filename=name, content_type=content_type, data=data)
    parsed = document_parse(format=fmt, data=data, limits=parse_limits())
    spans = passages_split(parsed.text, pages=parsed.pages)
    with transaction.atomic():
        # One upload of a name at a time: the second waits, then finds the first one's rows.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"document:{project.id}:{name}"])
        document = Document.objects.select_for_update().filter(project=project, name=name).first()
        if document is not None and document.content_hash == content_hash:
            return UploadResult(document=document, changed=False, created=False)
        created = document is None
        if document is None:
            document = Document(project=project, name=name)
        document.format = parsed.format
        document.content_hash = content_hash
        document.size_bytes = len(data)
        document.page_count = parsed.page_count
        document.text = parsed.text
        document.uploaded_by_id = user_id
        document.save()
        kept, new, removed = _passages_replace(project, document, spans, created=created)
    return UploadResult(
        document=document,
        changed=True,
        created=created,
        passages_kept=len(kept),
        passages_added=len(new),
        passages_removed=len(removed),
        added_ids=[p.id for p in new],
    )


def document_upload_as_member(
    *, principal: Principal, project_ref: object, name: str, data: bytes, content_type: str = ""
) -> UploadResult:
    """Upload a document into a project where the principal is an editor or owner."""
    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.EDITOR)
    return document_upload(
        project=project, name=name, data=data, content_type=content_type, user_id=principal.user_id
    )


def document_upload_as_operator(*, project_ref: str, name: str, data: bytes) -> UploadResult:
    """Upload a document into a project named by id or slug (``manage.py upload_document``)."""
    project = project_get_by_ref(project_ref=project_ref)
    return document_upload(project=project, name=name, data=data)


def document_delete_as_member(*, principal: Principal, project_ref: object, document_id: str) -> None:
    """Delete a document and its passages (an editor or owner of its project)."""
    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.EDITOR)
    found = parse_uuid(document_id)
    with transaction.atomic():
        names = mention_names_of_passages(
            passage_ids=list(
                Passage.objects.filter(project=project, document_id=found).values_list("id", flat=True)
            )
            if found is not None
            else []
        )
        deleted = Document.objects.filter(project=project, id=found).delete()[0] if found is not None else 0
        mention_names_prune(project_id=project.id, name_ids=names)
    if not deleted:
        raise DocumentNotFound("no such document in this project")

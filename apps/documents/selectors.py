"""Reads of a project's documents for REST and the command: lists, one document, its passages."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from apps.documents.errors import DocumentNotFound
from apps.documents.models import Document, Passage, PassageMention
from apps.projects.selectors import Principal, parse_uuid, project_get


def _documents(project_id: uuid.UUID) -> QuerySet[Document]:
    return (
        Document.objects.filter(project_id=project_id)
        .defer("text")
        .annotate(
            passage_count=Count("passages"),
            passages_pending=Count("passages", filter=Q(passages__embedding_pending=True)),
        )
        .order_by("-updated_at", "id")
    )


def documents_of_project(*, project_id: uuid.UUID) -> QuerySet[Document]:
    """The project's documents (none: ``search_passages`` could find nothing)."""
    return Document.objects.filter(project_id=project_id)


def document_list(*, principal: Principal, project_ref: object) -> QuerySet[Document]:
    """The documents of a project the principal may see, most recently uploaded first."""
    project = project_get(principal=principal, project_ref=project_ref)
    return _documents(project.id)


def document_of_project(*, project_id: uuid.UUID, document_id: object) -> Document:
    found = parse_uuid(document_id)
    document = _documents(project_id).filter(id=found).first() if found is not None else None
    if document is None:
        raise DocumentNotFound("no such document in this project")
    return document


def document_get(*, principal: Principal, project_ref: object, document_id: object) -> Document:
    """One document of a project the principal may see (``DocumentNotFound`` otherwise)."""
    project = project_get(principal=principal, project_ref=project_ref)
    return document_of_project(project_id=project.id, document_id=document_id)


@dataclass(frozen=True)
class DocumentPassages:
    document: Document
    passages: QuerySet[Passage]


def passage_list(*, principal: Principal, project_ref: object, document_id: object) -> DocumentPassages:
    """A document's passages in order."""
    document = document_get(principal=principal, project_ref=project_ref, document_id=document_id)
    passages = Passage.objects.filter(document=document).defer("search_vector").order_by("ordinal", "id")
    return DocumentPassages(document=document, passages=passages)


@dataclass(frozen=True)
class DocumentMentions:
    document: Document
    mentions: QuerySet[PassageMention]


def mention_list(*, principal: Principal, project_ref: object, document_id: object) -> DocumentMentions:
    """A document's mentions (issue #48's index), passage by passage in order, each with its name
    and the entity that name links."""
    document = document_get(principal=principal, project_ref=project_ref, document_id=document_id)
    mentions = (
        PassageMention.objects.filter(passage__document=document)
        .select_related("mention_name", "passage")
        .only(
            "id",
            "surface",
            "kind",
            "char_start",
            "char_end",
            "passage__id",
            "passage__ordinal",
            "mention_name__id",
            "mention_name__normalised",
            "mention_name__entity_id",
        )
        .order_by("passage__ordinal", "char_start", "id")
    )
    return DocumentMentions(document=document, mentions=mentions)


def document_by_name_or_id(*, project_id: uuid.UUID, ref: str) -> Document:
    """A project's document by id or name (operators' commands)."""
    found = parse_uuid(ref)
    document = (
        Document.objects.filter(project_id=project_id)
        .filter(**({"id": found} if found is not None else {"name": ref}))
        .first()
    )
    if document is None:
        raise DocumentNotFound(f"no document {ref!r} in this project")
    return document

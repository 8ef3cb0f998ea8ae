"""Reads of a project's documents for REST, the command and the mentions page: lists, one
document, its passages, its names."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.contrib.postgres.aggregates import ArrayAgg
from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import Count, Min, Q, QuerySet

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


# Characters of the passage shown on either side of a name's first mention in the document.
CONTEXT_CHARS = 60


@dataclass(frozen=True)
class NameInDocument:
    """A name a document mentions: its spellings there, the entity it links (None: a candidate),
    how many of the document's passages mention it, and its first mention in context."""

    name_id: uuid.UUID
    surfaces: list[str]
    kinds: list[str]
    entity_id: uuid.UUID | None
    entity_name: str
    entity_type: str
    passages: int
    first_ordinal: int
    before: str = ""
    surface: str = ""
    after: str = ""


def document_names(*, document: Document) -> QuerySet[PassageMention, dict[str, object]]:
    """The names ``document``'s passages mention, one row each, those mentioned by most passages
    first (then by name): what a page of ``names_in_context`` is cut from."""
    return (
        PassageMention.objects.filter(passage__document_id=document.id)
        .values("mention_name_id")
        .annotate(
            passage_count=Count("passage_id", distinct=True),
            first_ordinal=Min("passage__ordinal"),
            surfaces=ArrayAgg("surface", distinct=True, order_by="surface"),
            kinds=ArrayAgg("kind", distinct=True, order_by="kind"),
            normalised=Min("mention_name__normalised"),
        )
        .order_by("-passage_count", "normalised", "mention_name_id")
    )


def names_in_context(*, document: Document, rows: list[dict[str, object]]) -> list[NameInDocument]:
    """A page of ``document_names`` with each name's entity and its first mention in context
    (``CONTEXT_CHARS`` either side, "…" where the passage goes on): two queries whatever the
    page's size."""
    ids = [row["mention_name_id"] for row in rows]
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT n.id, n.entity_id, coalesce(e.name, ''), coalesce(e.type, '') FROM kb.mention_names n
               LEFT JOIN kb.graph_objects e ON e.id = n.entity_id WHERE n.id = ANY(%(ids)s)""",
            {"ids": ids},
        )
        entities = {row[0]: row[1:] for row in cursor.fetchall()}
        cursor.execute(
            """SELECT DISTINCT ON (m.mention_name_id) m.mention_name_id,
                      CASE WHEN m.char_start > %(chars)s THEN '…' ELSE '' END
                      || substr(p.text, greatest(m.char_start - %(chars)s, 0) + 1, least(m.char_start, %(chars)s)),
                      m.surface,
                      substr(p.text, m.char_end + 1, %(chars)s)
                      || CASE WHEN length(p.text) > m.char_end + %(chars)s THEN '…' ELSE '' END
               FROM kb.passage_mentions m JOIN kb.document_passages p ON p.id = m.passage_id
               WHERE p.document_id = %(document)s AND m.mention_name_id = ANY(%(ids)s)
               ORDER BY m.mention_name_id, p.ordinal, m.char_start""",
            {"ids": ids, "document": document.id, "chars": CONTEXT_CHARS},
        )
        contexts = {row[0]: row[1:] for row in cursor.fetchall()}
    found = []
    for row in rows:
        name_id = row["mention_name_id"]
        entity_id, entity_name, entity_type = entities.get(name_id, (None, "", ""))
        before, surface, after = contexts.get(name_id, ("", "", ""))
        found.append(
            NameInDocument(
                name_id=name_id,  # type: ignore[arg-type]
                surfaces=list(row["surfaces"])[:5],  # type: ignore[call-overload]
                kinds=list(row["kinds"]),  # type: ignore[call-overload]
                entity_id=entity_id,
                entity_name=entity_name,
                entity_type=entity_type,
                passages=int(row["passage_count"]),  # type: ignore[call-overload]
                first_ordinal=int(row["first_ordinal"]),  # type: ignore[call-overload]
                before=before,
                surface=surface,
                after=after,
            )
        )
    return found


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


@dataclass(frozen=True)
class MentionsPage:
    """A page of a document's names (``document_names``) in context: ``page`` is Django's page of
    rows, ``names`` the page's names, ``count`` the document's names in all."""

    document: Document
    page: Page[dict[str, object]]
    names: list[NameInDocument]
    count: int


def mentions_page_get(
    *, principal: Principal, project_ref: object, document_id: object, number: int, per_page: int
) -> MentionsPage:
    """Page ``number`` (from 1) of the names a document of a project the principal may see mentions,
    ``per_page`` to a page. ``DocumentNotFound``; Django's ``EmptyPage`` past the last page."""
    document = document_get(principal=principal, project_ref=project_ref, document_id=document_id)
    paginator = Paginator(document_names(document=document), per_page)
    page = paginator.page(number)
    names = names_in_context(document=document, rows=list(page.object_list))
    return MentionsPage(document=document, page=page, names=names, count=paginator.count)

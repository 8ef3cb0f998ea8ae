"""REST routes for importing and browsing a project's graph (PROTOCOL §2, §5b)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest
from ninja import Router, Schema
from pydantic import Field

from apps.core.inputs import ListLimit, ListOffset
from apps.core.paging import page_of
from apps.graph_tools import selectors, services
from apps.graph_tools.errors import ImportTooLarge
from apps.graph_tools.importer import MAX_TYPE
from apps.graph_tools.models import GraphChange, GraphObject
from apps.projects.auth import principal_of

router = Router(tags=["graph"])

MAX_QUERY = 1000  # the longest ``q`` (the search tools take queries of the same length)


class EntityOut(Schema):
    id: uuid.UUID
    key: str
    type: str
    name: str
    description: str
    properties: dict[str, Any]
    createdAt: datetime
    updatedAt: datetime


class EdgeOut(Schema):
    id: uuid.UUID
    type: str
    direction: str
    other: EntityOut
    properties: dict[str, Any]


class EntityWithEdgesOut(EntityOut):
    edges: list[EdgeOut]
    # The id or key asked for, when it named an entity merged into this one (an old citation).
    mergedFrom: str | None = None


class EntityList(Schema):
    items: list[EntityOut]
    count: int


class EmbeddingOut(Schema):
    total: int
    embedded: int
    pending: int
    # "pending" while entities wait for a vector, else "complete"
    state: str
    model: str


class ImportOut(Schema):
    entitiesCreated: int
    entitiesUpdated: int
    relationshipsCreated: int
    relationshipsUpdated: int
    entitiesEmbedded: int
    # The graph version the import made; null when the file held no records.
    graphVersion: int | None
    # The project's embedding progress at the commit: the background worker embeds what is pending.
    embedding: EmbeddingOut


class ChangeOut(Schema):
    id: int
    version: int
    action: str
    entityId: uuid.UUID | None
    relationshipId: uuid.UUID | None
    srcId: uuid.UUID | None
    dstId: uuid.UUID | None
    # Who made the change (the approver, for an approved write); null for operators.
    user: str | None
    # "approval" | "policy_never" | "direct" | "import"
    authority: str
    approvalId: uuid.UUID | None
    runId: uuid.UUID | None
    # A change extracted from a document: where it came from.
    documentId: uuid.UUID | None = None
    passageId: uuid.UUID | None = None
    before: Any
    after: Any
    createdAt: datetime


class ChangeList(Schema):
    items: list[ChangeOut]
    count: int


def change_out(change: GraphChange) -> ChangeOut:
    return ChangeOut(
        id=change.id,
        version=change.version,
        action=change.action,
        entityId=change.entity_id,
        relationshipId=change.relationship_id,
        srcId=change.src_id,
        dstId=change.dst_id,
        user=change.user.get_username() if change.user else None,
        authority=change.authority,
        approvalId=change.approval_id,
        runId=change.run_id,
        documentId=change.document_id,
        passageId=change.passage_id,
        before=change.before,
        after=change.after,
        createdAt=change.created_at,
    )


def entity_out(obj: GraphObject) -> EntityOut:
    return EntityOut(
        id=obj.id,
        key=obj.key,
        type=obj.type,
        name=obj.name,
        description=obj.description,
        properties=obj.properties,
        createdAt=obj.created_at,
        updatedAt=obj.updated_at,
    )


@router.post("/projects/{project_id}/graph/import", response=ImportOut)
async def import_graph(request: HttpRequest, project_id: str) -> ImportOut:
    try:
        body = request.body
    except RequestDataTooBig:
        raise ImportTooLarge() from None
    result = await services.graph_import_as_member(
        principal=principal_of(request), project_ref=project_id, lines=body.splitlines()
    )
    assert result.embedding is not None
    return ImportOut(
        **result.as_counts(),
        graphVersion=result.graph_version,
        embedding=EmbeddingOut(**result.embedding.as_json()),
    )


@router.get("/projects/{project_id}/graph/embedding", response=EmbeddingOut)
def embedding_status(request: HttpRequest, project_id: str) -> EmbeddingOut:
    status = selectors.embedding_status(principal=principal_of(request), project_ref=project_id)
    return EmbeddingOut(**status.as_json())


@router.get("/projects/{project_id}/graph/entities", response=EntityList)
def list_entities(
    request: HttpRequest,
    project_id: str,
    type: Annotated[str | None, Field(max_length=MAX_TYPE)] = None,
    q: Annotated[str | None, Field(max_length=MAX_QUERY)] = None,
    limit: ListLimit = 50,
    offset: ListOffset = 0,
) -> EntityList:
    qs = selectors.entity_list(principal=principal_of(request), project_ref=project_id, type=type, q=q)
    page = page_of(qs, limit=limit, offset=offset)
    return EntityList(items=[entity_out(o) for o in page.items], count=page.count)


@router.get("/projects/{project_id}/graph/entities/{id_or_key}", response=EntityWithEdgesOut)
def get_entity(request: HttpRequest, project_id: str, id_or_key: str) -> EntityWithEdgesOut:
    detail = selectors.entity_detail(principal=principal_of(request), project_ref=project_id, ref=id_or_key)
    edges = [
        EdgeOut(
            id=e.id, type=e.type, direction=e.direction, other=entity_out(e.other), properties=e.properties
        )
        for e in detail.edges
    ]
    return EntityWithEdgesOut(**entity_out(detail.entity).dict(), edges=edges, mergedFrom=detail.merged_from)


@router.get("/projects/{project_id}/graph/entities/{id_or_key}/history", response=ChangeList)
def entity_history(
    request: HttpRequest, project_id: str, id_or_key: str, limit: ListLimit = 100, offset: ListOffset = 0
) -> ChangeList:
    changes = selectors.entity_history(principal=principal_of(request), project_ref=project_id, ref=id_or_key)
    page = page_of(changes, limit=limit, offset=offset)
    return ChangeList(items=[change_out(c) for c in page.items], count=page.count)

"""REST routes of graph curation (docs/protocol.md, "Curation"): the queues, a page at a time, and an
entity's capped neighbourhood for the drawing on its page."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field

from apps.curation import neighbourhood as neighbourhoods
from apps.curation.queues import LIMIT_DEFAULT, LIMIT_MAX, queue_page
from apps.projects.auth import principal_of

router = Router(tags=["curation"])


class QueuePageOut(Schema):
    kind: str
    items: list[dict[str, Any]]
    # The next page's cursor; null once the walk has reached the graph's last entity.
    nextCursor: str | None
    bounds: dict[str, int]


@router.get("/projects/{project_id}/curation/queues/{kind}", response=QueuePageOut)
def curation_queue(
    request: HttpRequest,
    project_id: str,
    kind: str,
    cursor: Annotated[str | None, Field(max_length=1000)] = None,
    limit: Annotated[int, Field(ge=1, le=LIMIT_MAX)] = LIMIT_DEFAULT,
) -> dict[str, Any]:
    page = queue_page(
        principal=principal_of(request), project_ref=project_id, kind=kind, cursor=cursor, limit=limit
    )
    return page.as_json()


class NeighbourhoodQuery(Schema):
    type: list[Annotated[str, Field(max_length=128)]] = Field(default_factory=list, max_length=50)
    limit: Annotated[int, Field(ge=1, le=neighbourhoods.LIMIT_MAX)] = neighbourhoods.LIMIT_DEFAULT


class NeighbourOut(Schema):
    id: str
    key: str
    type: str
    name: str


class NeighbourEdgeOut(Schema):
    id: str
    type: str
    src: str
    dst: str


class NeighbourhoodOut(Schema):
    center: NeighbourOut
    nodes: list[NeighbourOut]
    edges: list[NeighbourEdgeOut]
    # The other ends' types among the relationships looked at, with their counts.
    types: dict[str, int]
    truncated: bool
    scanned: int
    limit: int


@router.get("/projects/{project_id}/graph/entities/{id_or_key}/neighbourhood", response=NeighbourhoodOut)
def entity_neighbourhood(
    request: HttpRequest, project_id: str, id_or_key: str, query: Query[NeighbourhoodQuery]
) -> dict[str, Any]:
    return neighbourhoods.neighbourhood(
        principal=principal_of(request),
        project_ref=project_id,
        ref=id_or_key,
        types=query.type or None,
        limit=query.limit,
    )

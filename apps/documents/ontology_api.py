"""REST routes of the draft ontology proposed from a project's documents (#51; docs/protocol.md
"Ontology"): ``/api/projects/{projectId}/ontology/draft``, to request (the model, here), read and
discard it, all under one path and so one router. Accepting it is the graph's route
(``apps/graph_tools/ontology/api.py``)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from apps.documents.ontology_draft import ontology_draft_propose
from apps.graph_tools.ontology import selectors, services
from apps.graph_tools.ontology.api import DraftOut
from apps.projects.auth import principal_of

router = Router(tags=["ontology"])


@router.post("/projects/{project_id}/ontology/draft", response={201: DraftOut})
async def ontology_draft_request(request: HttpRequest, project_id: str) -> tuple[int, DraftOut]:
    row = await ontology_draft_propose(principal=principal_of(request), project_ref=project_id)
    assert row.draft is not None
    return 201, DraftOut(draft=row.draft, notes=row.draft_notes, proposedAt=row.draft_at)


@router.get("/projects/{project_id}/ontology/draft", response=DraftOut)
def ontology_draft(request: HttpRequest, project_id: str) -> DraftOut:
    state = selectors.ontology_draft_get(principal=principal_of(request), project_ref=project_id)
    assert state.row is not None and state.row.draft is not None
    return DraftOut(draft=state.row.draft, notes=state.row.draft_notes, proposedAt=state.row.draft_at)


@router.delete("/projects/{project_id}/ontology/draft", response={204: None})
def ontology_draft_discard(request: HttpRequest, project_id: str) -> tuple[int, None]:
    services.ontology_draft_discard(principal=principal_of(request), project_ref=project_id)
    return 204, None

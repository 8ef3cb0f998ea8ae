"""REST routes of curation (#51, docs/protocol.md "Curation"): propose a curation change set, undo
an applied one, list a project's change sets, read and set the project's curation settings. The
review is the one decision of every change set (``POST /api/change-sets/{id}/decision``)."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import ConfigDict, Field, StrictBool

from apps.core.inputs import ListLimit, ListOffset
from apps.core.paging import page_of
from apps.curation import proposals, review, selectors
from apps.documents.api import ChangeSetOut, change_set_out
from apps.projects.auth import principal_of

router = Router(tags=["curation"])


class ProposalIn(Schema):
    # Each {"action": <write tool>, "args": {...}}: checked by the service, which names the change at fault.
    changes: list[Any]
    summary: str = ""


class ChangeSetList(Schema):
    items: list[ChangeSetOut]
    count: int


class CurationSettingsIn(Schema):
    # Strict, and no other key: "yes" or {"bogus": 1} is a 400, never read as true or ignored.
    model_config = ConfigDict(extra="forbid")

    authorsApproveOwn: StrictBool | None = None


class CurationSettingsOut(Schema):
    authorsApproveOwn: bool


@router.post("/projects/{project_id}/curation/change-sets", response={201: ChangeSetOut})
def propose_change_set(request: HttpRequest, project_id: str, payload: ProposalIn) -> Status:
    change_set = proposals.curation_propose(
        principal=principal_of(request),
        project_id=project_id,
        changes=payload.changes,
        summary=payload.summary,
    )
    return Status(201, change_set_out(change_set))


@router.post("/change-sets/{change_set_id}/undo", response={201: ChangeSetOut})
def undo_change_set(request: HttpRequest, change_set_id: str) -> Status:
    change_set = proposals.curation_undo(principal=principal_of(request), change_set_id=change_set_id)
    return Status(201, change_set_out(change_set))


@router.get("/projects/{project_id}/change-sets", response=ChangeSetList)
def list_change_sets(
    request: HttpRequest,
    project_id: str,
    kind: Annotated[str | None, Field(max_length=16)] = None,
    status: Annotated[str | None, Field(max_length=16)] = None,
    limit: ListLimit = 50,
    offset: ListOffset = 0,
) -> ChangeSetList:
    qs = selectors.change_set_list(
        principal=principal_of(request), project_ref=project_id, kind=kind, status=status
    )
    page = page_of(qs, limit=limit, offset=offset)
    return ChangeSetList(items=[change_set_out(c) for c in page.items], count=page.count)


@router.get("/projects/{project_id}/curation/settings", response=CurationSettingsOut)
def get_curation_settings(request: HttpRequest, project_id: str) -> CurationSettingsOut:
    row = review.curation_settings_get(principal=principal_of(request), project_ref=project_id)
    return CurationSettingsOut(authorsApproveOwn=row.authors_approve_own)


@router.put("/projects/{project_id}/curation/settings", response=CurationSettingsOut)
def set_curation_settings(
    request: HttpRequest, project_id: str, payload: CurationSettingsIn
) -> CurationSettingsOut:
    row = review.curation_settings_set(
        principal=principal_of(request), project_ref=project_id, authors_approve_own=payload.authorsApproveOwn
    )
    return CurationSettingsOut(authorsApproveOwn=row.authors_approve_own)

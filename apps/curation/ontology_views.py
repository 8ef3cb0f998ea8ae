"""The page of a project's ontology (#51): the one in force (as YAML) and how writes that break it
are treated, an import form, export links (the schema the graph has), and the draft proposed from
the project's documents, with accept and discard. Rendered on the server; each form posts here and
makes one call into the ontology's services (``apps.graph_tools.ontology``) or the draft's
(``apps.documents.ontology_draft``)."""

from __future__ import annotations

import uuid
from typing import Any

import yaml
from asgiref.sync import async_to_sync
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from apps.core.errors import NotFound, ServiceError
from apps.curation.views import query_checked
from apps.documents.ontology_draft import ontology_draft_propose
from apps.graph_tools.ontology import services
from apps.graph_tools.ontology.formats import MAX_BYTES, ontology_write
from apps.graph_tools.ontology.queue import violations_page
from apps.graph_tools.ontology.selectors import ontology_state
from apps.projects.models import Role
from apps.projects.selectors import Principal, principal_from_user, project_get, project_role

ACTIONS = ("import", "enforcement", "delete", "propose", "accept", "discard")


def _import(request: HttpRequest, principal: Principal, project_id: uuid.UUID) -> None:
    upload = request.FILES.get("file")
    if upload is None:
        raise ServiceError("choose an ontology file to import", code="invalid_ontology")
    if upload.size is not None and upload.size > MAX_BYTES:
        raise ServiceError(f"the ontology file is larger than {MAX_BYTES} bytes", code="payload_too_large")
    services.ontology_import(
        principal=principal,
        project_ref=project_id,
        data=upload.read(MAX_BYTES + 1),
        asked_format=request.POST.get("format") or None,
        filename=upload.name or "",
        on_violation=request.POST.get("on_violation") or None,
    )


def _act(request: HttpRequest, principal: Principal, project_id: uuid.UUID, action: str) -> None:
    if action == "import":
        _import(request, principal, project_id)
    elif action == "enforcement":
        services.ontology_enforcement_set(
            principal=principal, project_ref=project_id, on_violation=request.POST.get("on_violation", "")
        )
    elif action == "delete":
        services.ontology_delete(principal=principal, project_ref=project_id)
    elif action == "propose":
        async_to_sync(ontology_draft_propose)(principal=principal, project_ref=project_id)
    elif action == "accept":
        services.ontology_draft_accept(principal=principal, project_ref=project_id)
    elif action == "discard":
        services.ontology_draft_discard(principal=principal, project_ref=project_id)
    else:
        raise ServiceError(f"unknown action; one of {', '.join(ACTIONS)}")


def _context(principal: Principal, project_id: uuid.UUID) -> dict[str, Any]:
    state = ontology_state(principal=principal, project_ref=project_id)
    project = project_get(principal=principal, project_ref=state.project_id)
    row = state.row
    queue = violations_page(project_id=state.project_id, limit=20) if state.ontology else None
    return {
        "project": project,
        "nav": "ontology",
        # Every change is an editor's or owner's (the services refuse a viewer): a viewer sees no form.
        "may_change": project_role(principal=principal, project=project) in (Role.OWNER, Role.EDITOR),
        "ontology_yaml": ontology_write(state.ontology, "yaml", with_setting=False) if state.ontology else "",
        "on_violation": row.on_violation if row else "refuse",
        "updated_at": row.updated_at if row and state.ontology else None,
        "draft_yaml": yaml.safe_dump(row.draft, allow_unicode=True, sort_keys=False)
        if row and row.draft
        else "",
        "draft_notes": row.draft_notes if row else "",
        "queue": queue,
    }


@login_required
@query_checked
def ontology_page(request: HttpRequest, project_id: uuid.UUID) -> HttpResponse:
    """Any member sees it (others 404); editors and owners change it. A refused change is shown on
    the page with its reason, at the status the REST route would answer."""
    principal = principal_from_user(request.user)
    if principal is None:
        raise Http404("project not found")
    error, status = "", 200
    if request.method == "POST":
        try:
            _act(request, principal, project_id, request.POST.get("action", ""))
            return redirect(request.path)
        except NotFound as exc:
            if exc.code == "project_not_found":
                raise Http404("project not found") from None
            error, status = exc.message, exc.status
        except ServiceError as exc:
            error, status = exc.message, exc.status
    try:
        context = _context(principal, project_id)
    except NotFound:
        raise Http404("project not found") from None
    return render(request, "curation/ontology.html", {**context, "error": error}, status=status)

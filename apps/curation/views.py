"""The graph pages of a project (#51), rendered on the server for its members: the graph (types with
counts, search, the entity list a page at a time), an entity's page (properties, aliases,
relationships by type and direction, the passages that mention it, my answers that cited it, its
history, and the neighbourhood drawing its script fetches), and the curation queues, a tab each."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from apps.core.errors import NotFound
from apps.core.inputs import InvalidInput, input_check
from apps.curation import graph_selectors as selectors
from apps.curation.change_set_rows import change_sets_page_read
from apps.curation.entity_page import entity_page_read
from apps.curation.queues import LIMIT_DEFAULT, InvalidCursor, queue_kinds, queue_read
from apps.graph_tools.errors import EntityNotFound
from apps.projects.selectors import Principal, principal_from_user, project_get

MAX_TYPE = 128


def _principal(request: HttpRequest) -> Principal:
    principal = principal_from_user(request.user)
    if principal is None:
        raise Http404("project not found")
    return principal


def _bad_request(request: HttpRequest, project_id: uuid.UUID, error: str) -> HttpResponse:
    return render(request, "curation/error.html", {"project": None, "error": error}, status=400)


def query_checked(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``view``, answering 400 (the page's error, naming the parameter) for a query string holding
    what cannot be stored or searched (a NUL, a lone surrogate), before the view reads it."""

    @functools.wraps(view)
    def checked(request: HttpRequest, project_id: uuid.UUID, **kwargs: Any) -> HttpResponse:
        try:
            input_check(dict(request.GET.items()))
        except InvalidInput as exc:
            return _bad_request(request, project_id, exc.message)
        return view(request, project_id, **kwargs)

    return checked


@login_required
@query_checked
def graph_page(request: HttpRequest, project_id: uuid.UUID) -> HttpResponse:
    """Any member: the types with their counts, a search (``?q=``), the entities of a type
    (``?type=``) by name, a page at a time (``?after=<cursor>``); anyone else 404."""
    principal = _principal(request)
    q = request.GET.get("q", "").strip()[: selectors.MAX_QUERY]
    chosen = request.GET.get("type", "").strip()[:MAX_TYPE] or None
    try:
        overview = selectors.graph_overview(principal=principal, project_ref=project_id)
        if q:
            items = selectors.entity_search(project_id=overview.project.id, q=q, type=chosen)
            next_cursor = None
        else:
            page = selectors.entity_list_page(
                project_id=overview.project.id, type=chosen, after=request.GET.get("after") or None
            )
            items, next_cursor = page.items, page.next_cursor
    except NotFound:
        raise Http404("project not found") from None
    except InvalidCursor as exc:
        return _bad_request(request, project_id, exc.message)
    context = {
        "project": overview.project,
        "overview": overview,
        "q": q,
        "chosen": chosen,
        "items": items,
        "next_cursor": next_cursor,
        "search_max": selectors.SEARCH_MAX,
        "nav": "graph",
    }
    return render(request, "curation/graph.html", context)


@login_required
@query_checked
def entity_page(request: HttpRequest, project_id: uuid.UUID, entity_id: uuid.UUID) -> HttpResponse:
    """Any member: one entity of the project; anyone else, or an entity of another project, 404."""
    try:
        page = entity_page_read(
            principal=_principal(request),
            project_ref=project_id,
            entity_id=entity_id,
            history_page=request.GET.get("history"),
        )
    except (NotFound, EntityNotFound):
        raise Http404("entity not found") from None
    if page.entity.id != entity_id:  # merged into this one since: its page is this one's
        return redirect("curation:entity", project_id=page.project.id, entity_id=page.entity.id)
    context = {
        "project": page.project,
        "entity": page.entity,
        "aliases": page.aliases,
        "properties": page.properties,
        "groups": page.groups,
        "passages": page.passages,
        "answers": page.answers,
        "history_page": page.history_page,
        "history": page.history,
        "bounds": {
            "edges": selectors.EDGES_PER_GROUP,
            "passages": selectors.PASSAGES_SHOWN,
            "answers": selectors.ANSWERS_SHOWN,
        },
        "nav": "graph",
    }
    return render(request, "curation/entity.html", context)


QUEUE_TITLES = {
    "orphans": "Orphans",
    "duplicates": "Duplicates",
    "unsupported": "Unsupported",
}


def _queue_tabs() -> list[tuple[str, str]]:
    """Each queue's kind and its tab's title."""
    return [
        (k, QUEUE_TITLES.get(k, k.replace("-", " ").replace("_", " ").capitalize())) for k in queue_kinds()
    ]


@login_required
@query_checked
def queues_page(request: HttpRequest, project_id: uuid.UUID) -> HttpResponse:
    """Any member: a queue's page (``?kind=``, ``?cursor=``), with a tab for each queue."""
    principal = _principal(request)
    kind = request.GET.get("kind", "orphans")
    if kind not in queue_kinds():
        raise Http404("no such queue")
    try:
        project = project_get(principal=principal, project_ref=project_id)
        page = queue_read(
            project_id=project.id, kind=kind, cursor=request.GET.get("cursor") or None, limit=LIMIT_DEFAULT
        )
    except InvalidCursor as exc:
        return _bad_request(request, project_id, exc.message)
    except NotFound:
        raise Http404("project not found") from None
    tabs = _queue_tabs()
    context = {
        "project": project,
        "kind": kind,
        "tabs": tabs,
        "page": page,
        "first": not request.GET.get("cursor"),
        "nav": "queues",
    }
    return render(request, "curation/queues.html", context)


CHANGE_SETS_SHOWN = 25


@login_required
@query_checked
def change_sets_page(request: HttpRequest, project_id: uuid.UUID) -> HttpResponse:
    """Any member: the project's curation change sets, newest first (the first ``CHANGE_SETS_SHOWN``),
    each with its items; an editor or owner approves or rejects one in review and undoes an
    applied one from here (the page's script posts part A's routes; the server says who may)."""
    try:
        page = change_sets_page_read(
            principal=_principal(request), project_ref=project_id, limit=CHANGE_SETS_SHOWN
        )
    except NotFound:
        raise Http404("project not found") from None
    context = {
        "project": page.project,
        "rows": page.rows,
        "tabs": _queue_tabs(),
        "nav": "queues",
        "shown": CHANGE_SETS_SHOWN,
        # A viewer is shown no Approve, Reject or Undo: the server would refuse them.
        "may_change": page.may_change,
    }
    return render(request, "curation/change_sets.html", context)

"""The page of a document's mentions (issue #48 deliverable 3): the names its passages mention,
grouped by name, each linked to its entity (opened on the chat page) or shown as a candidate, with
how many passages mention it; rendered on the server, a page of ``NAMES_PER_PAGE`` at a time."""

from __future__ import annotations

import re
import uuid

from django.contrib.auth.decorators import login_required
from django.core.paginator import EmptyPage
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from apps.core.errors import NotFound
from apps.documents.selectors import mentions_page_get
from apps.projects.selectors import principal_from_user

NAMES_PER_PAGE = 50


@login_required
def mentions_page(request: HttpRequest, project_id: uuid.UUID, document_id: uuid.UUID) -> HttpResponse:
    """Any member: the document's names, most mentioned first; anyone else 404; a page number
    that is not a positive whole number 400, one past the last 404."""
    principal = principal_from_user(request.user)
    asked = request.GET.get("page", "1")
    if principal is None:
        raise Http404("document not found")
    if not re.fullmatch(r"[1-9][0-9]{0,8}", asked):
        return _error(request, project_id, "The page number must be a whole number from 1.", 400)
    try:
        found = mentions_page_get(
            principal=principal,
            project_ref=project_id,
            document_id=document_id,
            number=int(asked),
            per_page=NAMES_PER_PAGE,
        )
    except NotFound:
        raise Http404("document not found") from None
    except EmptyPage:
        return _error(request, project_id, f"There is no page {asked} of this document's names.", 404)
    context = {
        "document": found.document,
        "project_id": project_id,
        "page": found.page,
        "names": found.names,
        "count": found.count,
    }
    return render(request, "documents/mentions.html", context)


def _error(request: HttpRequest, project_id: uuid.UUID, error: str, status: int) -> HttpResponse:
    return render(
        request, "documents/mentions.html", {"project_id": project_id, "error": error}, status=status
    )

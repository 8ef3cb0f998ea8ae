"""The page of a document's mentions (issue #48 deliverable 3): the names its passages mention,
grouped by name, each linked to its entity (opened on the chat page) or shown as a candidate, with
how many passages mention it; rendered on the server, a page of ``NAMES_PER_PAGE`` at a time."""

from __future__ import annotations

import re
import uuid

from django.contrib.auth.decorators import login_required
from django.core.paginator import EmptyPage, Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from apps.core.errors import NotFound
from apps.documents.selectors import document_get, document_names, names_in_context
from apps.projects.selectors import principal_from_user

NAMES_PER_PAGE = 50


@login_required
def mentions_page(request: HttpRequest, project_id: uuid.UUID, document_id: uuid.UUID) -> HttpResponse:
    """Any member: the document's names, most mentioned first; anyone else 404; a page number
    that is not a positive whole number 400, one past the last 404."""
    principal = principal_from_user(request.user)
    if principal is None:
        raise Http404("document not found")
    try:
        document = document_get(principal=principal, project_ref=project_id, document_id=document_id)
    except NotFound:
        raise Http404("document not found") from None
    context: dict[str, object] = {"document": document, "project_id": project_id}
    asked = request.GET.get("page", "1")
    if not re.fullmatch(r"[1-9][0-9]{0,8}", asked):
        context["error"] = "The page number must be a whole number from 1."
        return render(request, "documents/mentions.html", context, status=400)
    paginator = Paginator(document_names(document=document), NAMES_PER_PAGE)
    try:
        page = paginator.page(int(asked))
    except EmptyPage:
        context["error"] = f"There is no page {asked}: this document's names fill {paginator.num_pages}."
        return render(request, "documents/mentions.html", context, status=404)
    names = names_in_context(document=document, rows=list(page.object_list))
    context.update(page=page, names=names, count=paginator.count)
    return render(request, "documents/mentions.html", context)

"""The chat pages (PROTOCOL §5). The page itself talks to the API and the websocket."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.chat.selectors import ConversationNotFound, conversation_get
from apps.graph_tools.writes import change_action_words
from apps.projects.selectors import parse_uuid, principal_from_user


def index(request: HttpRequest) -> HttpResponse:
    """Send a visitor to the chat page, or to the login page first."""
    if not request.user.is_authenticated:
        return redirect_to_login(reverse("chat:new"))
    return redirect("chat:new")


@login_required
def chat_page(request: HttpRequest, conversation_id: uuid.UUID | None = None) -> HttpResponse:
    """The chat page: a new conversation (in ``?project=<id>`` when I am one of its members, else
    the one I chose last), or one of mine (anyone else's answers 404)."""
    asked = parse_uuid(request.GET.get("project", ""))
    project_id = str(asked) if asked is not None else None
    conversation_ref = None
    if conversation_id is not None:
        principal = principal_from_user(request.user)
        if principal is None:
            raise Http404("conversation not found")
        try:
            conversation = conversation_get(principal=principal, conversation_id=conversation_id)
        except ConversationNotFound:
            raise Http404("conversation not found") from None
        project_id = str(conversation.project_id)
        conversation_ref = str(conversation.id)
    config = {
        "conversationId": conversation_ref,
        "projectId": project_id,
        "username": request.user.get_username(),
        "wsPath": "/ws/chat/",
        "apiBase": "/api",
        "changeActions": change_action_words(),
    }
    return render(request, "chat/chat.html", {"chat_config": config})

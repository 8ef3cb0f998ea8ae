"""The read-only page of a share link, ``/share/<token>``, rendered on the server (no chat, no script)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apps.chat.conversations.export import shared_messages
from apps.chat.conversations.sharing import ShareNotFound, shared_conversation_get
from apps.projects.selectors import principal_from_user


@login_required
def share_page(request: HttpRequest, token: str) -> HttpResponse:
    """The conversation a share link shows, for members of its project; anyone else gets 404."""
    principal = principal_from_user(request.user)
    try:
        if principal is None:
            raise ShareNotFound()
        share, conversation = shared_conversation_get(principal=principal, token=token)
    except ShareNotFound:
        return render(request, "chat/share_gone.html", status=404)
    context = {
        "share": share,
        "conversation": conversation,
        "project": conversation.project,
        "messages": shared_messages(conversation),
    }
    return render(request, "chat/share.html", context)

"""REST routes for export, share links and feedback on answers (issue #14). Each makes one service call."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from ninja import Router, Schema, Status

from apps.chat.conversations.export import conversation_export
from apps.chat.conversations.feedback import feedback_clear, feedback_set
from apps.chat.conversations.sharing import share_create, share_list, share_revoke, shared_conversation_detail
from apps.chat.models import ConversationShare, MessageFeedback
from apps.chat.transports.api import FeedbackOut, MessageOut, message_out
from apps.core.inputs import ListLimit, ListOffset
from apps.core.paging import page_of
from apps.projects.auth import principal_of

router = Router(tags=["chat"])


@router.get("/chat/conversations/{conversation_id}/export", response={200: None})
def export_conversation(
    request: HttpRequest, conversation_id: str, format: Literal["markdown", "json"] = "markdown"
) -> HttpResponse:
    """The conversation as a Markdown or JSON file (``Content-Disposition: attachment``)."""
    document = conversation_export(
        principal=principal_of(request), conversation_id=conversation_id, format=format
    )
    response = HttpResponse(document.body, content_type=document.content_type)
    response["Content-Disposition"] = f'attachment; filename="{document.filename}"'
    return response


class ShareIn(Schema):
    expiresInHours: int | None = None


class ShareOut(Schema):
    id: uuid.UUID
    conversationId: uuid.UUID
    status: str
    createdBy: str
    createdAt: datetime
    expiresAt: datetime | None
    revokedAt: datetime | None


class ShareCreatedOut(ShareOut):
    token: str
    url: str


class ShareList(Schema):
    items: list[ShareOut]
    count: int


def share_out(share: ConversationShare) -> ShareOut:
    return ShareOut(
        id=share.id,
        conversationId=share.conversation_id,
        status=share.status_at(timezone.now()),
        createdBy=share.created_by.get_username(),
        createdAt=share.created_at,
        expiresAt=share.expires_at,
        revokedAt=share.revoked_at,
    )


@router.post("/chat/conversations/{conversation_id}/shares", response={201: ShareCreatedOut})
def create_share(request: HttpRequest, conversation_id: str, payload: ShareIn) -> Status[ShareCreatedOut]:
    share, token = share_create(
        principal=principal_of(request),
        conversation_id=conversation_id,
        expires_in_hours=payload.expiresInHours,
    )
    url = request.build_absolute_uri(reverse("chat:share", args=[token]))
    return Status(201, ShareCreatedOut(**share_out(share).dict(), token=token, url=url))


SHARE_PAGE = 100


@router.get("/chat/conversations/{conversation_id}/shares", response=ShareList)
def list_shares(
    request: HttpRequest, conversation_id: str, limit: ListLimit = 100, offset: ListOffset = 0
) -> ShareList:
    qs = share_list(principal=principal_of(request), conversation_id=conversation_id).select_related(
        "created_by"
    )
    page = page_of(qs, limit=limit, offset=offset, size=SHARE_PAGE)
    return ShareList(items=[share_out(s) for s in page.items], count=page.count)


@router.delete("/chat/conversations/{conversation_id}/shares/{share_id}", response={204: None})
def revoke_share(request: HttpRequest, conversation_id: str, share_id: str) -> Status[None]:
    share_revoke(principal=principal_of(request), conversation_id=conversation_id, share_id=share_id)
    return Status(204, None)


class SharedConversationOut(Schema):
    id: uuid.UUID
    projectId: uuid.UUID
    title: str
    sharedBy: str
    createdAt: datetime
    updatedAt: datetime
    expiresAt: datetime | None
    messages: list[MessageOut]


@router.get("/shares/{token}", response=SharedConversationOut)
def get_shared(request: HttpRequest, token: str) -> SharedConversationOut:
    """The conversation a share link shows, read-only, for a member of its project."""
    shared = shared_conversation_detail(principal=principal_of(request), token=token)
    conversation = shared.conversation
    return SharedConversationOut(
        id=conversation.id,
        projectId=conversation.project_id,
        title=conversation.title,
        sharedBy=shared.share.created_by.get_username(),
        createdAt=conversation.created_at,
        updatedAt=conversation.updated_at,
        expiresAt=shared.share.expires_at,
        messages=[
            message_out(
                m,
                feedback=FeedbackOut(rating=f.rating, comment=f.comment, updatedAt=f.updated_at)
                if (f := shared.feedback.get(m.id))
                else None,
                usage=shared.usage.get(m.id),
            )
            for m in shared.messages
        ],
    )


class FeedbackIn(Schema):
    rating: Literal["up", "down"]
    comment: str = ""


class FeedbackSetOut(Schema):
    messageId: uuid.UUID
    rating: str
    comment: str
    runId: uuid.UUID | None
    createdAt: datetime
    updatedAt: datetime


def feedback_out(f: MessageFeedback) -> FeedbackSetOut:
    return FeedbackSetOut(
        messageId=f.message_id,
        rating=f.rating,
        comment=f.comment,
        runId=f.agent_run_id,
        createdAt=f.created_at,
        updatedAt=f.updated_at,
    )


@router.put("/chat/messages/{message_id}/feedback", response=FeedbackSetOut)
def set_feedback(request: HttpRequest, message_id: str, payload: FeedbackIn) -> FeedbackSetOut:
    feedback = feedback_set(
        principal=principal_of(request), message_id=message_id, rating=payload.rating, comment=payload.comment
    )
    return feedback_out(feedback)


@router.delete("/chat/messages/{message_id}/feedback", response={204: None})
def clear_feedback(request: HttpRequest, message_id: str) -> Status[None]:
    feedback_clear(principal=principal_of(request), message_id=message_id)
    return Status(204, None)

"""REST and SSE routes of the chat (PROTOCOL §2–§3). Each route makes one service call."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router, Schema, Status

from apps.chat import selectors
from apps.chat.conversations import lifecycle
from apps.chat.conversations.details import conversation_detail
from apps.chat.conversations.search import conversation_search
from apps.chat.conversations.usage import Usage
from apps.chat.models import Conversation, Message
from apps.chat.streams.bus import get_bus
from apps.chat.streams.frames import ChatMessageIn
from apps.chat.transports.approvals_api import ApprovalOut, approval_out
from apps.chat.turns import service as turns
from apps.core.inputs import ListLimit, ListOffset, search_text_check
from apps.core.paging import page_of
from apps.graph_tools.selectors import approvals_waiting
from apps.projects.auth import principal_of, token_or_session_releasing
from apps.projects.selectors import parse_uuid

router = Router(tags=["chat"])


class ToolCallOut(Schema):
    id: str
    name: str
    input: Any = None
    output: Any = None
    error: str | None = None


class FeedbackOut(Schema):
    rating: str
    comment: str
    updatedAt: datetime


class AnswerUsageOut(Schema):
    inputTokens: int
    outputTokens: int
    cost: float | None


class MessageOut(Schema):
    id: uuid.UUID
    role: str
    content: str
    toolCalls: list[ToolCallOut]
    retrievalContext: Any = None
    citations: list[dict[str, Any]]
    createdAt: datetime
    feedback: FeedbackOut | None = None
    usage: AnswerUsageOut | None = None
    # Set on an answer the graph moved on from: the changes since, of entities it used.
    graphChanged: dict[str, Any] | None = None
    # The answer is stale: an entity it used or cited changed since (an edit, a delete, a merge).
    stale: bool = False


class ConversationOut(Schema):
    id: uuid.UUID
    projectId: uuid.UUID
    title: str
    agentDefinitionId: uuid.UUID | None
    createdAt: datetime
    updatedAt: datetime


class ConversationWithMessagesOut(ConversationOut):
    messages: list[MessageOut]
    usage: AnswerUsageOut
    # Graph changes its agent proposed that wait for a decision (the page shows them as cards).
    pendingApprovals: list[ApprovalOut] = []


class ConversationList(Schema):
    items: list[ConversationOut]
    count: int


class ConversationHitOut(ConversationOut):
    snippet: str


class ConversationSearchList(Schema):
    items: list[ConversationHitOut]
    count: int


def usage_out(u: Usage) -> AnswerUsageOut:
    return AnswerUsageOut(inputTokens=u.input_tokens, outputTokens=u.output_tokens, cost=u.cost)


class RenameIn(Schema):
    title: str


class CancelOut(Schema):
    cancelled: bool


def conversation_out(c: Conversation) -> ConversationOut:
    return ConversationOut(
        id=c.id,
        projectId=c.project_id,
        title=c.title,
        agentDefinitionId=c.agent_definition_id,
        createdAt=c.created_at,
        updatedAt=c.updated_at,
    )


def message_out(
    m: Message,
    *,
    feedback: FeedbackOut | None = None,
    usage: Usage | None = None,
    graph_changed: dict[str, Any] | None = None,
) -> MessageOut:
    return MessageOut(
        graphChanged=graph_changed,
        stale=graph_changed is not None,
        id=m.id,
        role=m.role,
        content=m.content,
        toolCalls=[
            ToolCallOut(**{k: c.get(k) for k in ("id", "name", "input", "output", "error")})
            for c in m.tool_calls or []
        ],
        retrievalContext=m.retrieval_context,
        citations=m.citations or [],
        createdAt=m.created_at,
        feedback=feedback,
        usage=usage_out(usage) if usage else None,
    )


CONVERSATION_PAGE = 200


@router.get("/chat/conversations", response=ConversationList | ConversationSearchList)
def list_conversations(
    request: HttpRequest,
    projectId: str | None = None,
    limit: ListLimit = 50,
    offset: ListOffset = 0,
    q: str | None = None,
) -> ConversationList | ConversationSearchList:
    project_id = parse_uuid(projectId) if projectId else None
    query = search_text_check(q) if q is not None else ""
    if projectId and project_id is None:
        return ConversationSearchList(items=[], count=0) if query else ConversationList(items=[], count=0)
    limit = min(limit, CONVERSATION_PAGE)
    if query:
        hits, total = conversation_search(
            principal=principal_of(request), q=query, project_id=project_id, limit=limit, offset=offset
        )
        return ConversationSearchList(
            items=[
                ConversationHitOut(**conversation_out(h.conversation).dict(), snippet=h.snippet) for h in hits
            ],
            count=total,
        )
    qs = selectors.conversation_list(principal=principal_of(request), project_id=project_id)
    page = page_of(qs, limit=limit, offset=offset, size=CONVERSATION_PAGE)
    return ConversationList(items=[conversation_out(c) for c in page.items], count=page.count)


@router.get("/chat/conversations/{conversation_id}", response=ConversationWithMessagesOut)
def get_conversation(request: HttpRequest, conversation_id: str) -> ConversationWithMessagesOut:
    principal = principal_of(request)
    detail = conversation_detail(principal=principal, conversation_id=conversation_id)
    conversation = detail.conversation
    changed = selectors.answers_graph_changed(project_id=conversation.project_id, messages=detail.messages)
    messages = [
        message_out(
            m,
            feedback=FeedbackOut(rating=f.rating, comment=f.comment, updatedAt=f.updated_at)
            if (f := detail.feedback.get(m.id))
            else None,
            usage=detail.usage.get(m.id),
            graph_changed=changed.get(m.id),
        )
        for m in detail.messages
    ]
    pending = [
        approval_out(a, principal=principal) for a in approvals_waiting(conversation_id=conversation.id)
    ]
    return ConversationWithMessagesOut(
        **conversation_out(conversation).dict(),
        messages=messages,
        usage=usage_out(detail.total),
        pendingApprovals=pending,
    )


@router.patch("/chat/conversations/{conversation_id}", response=ConversationOut)
def rename_conversation(request: HttpRequest, conversation_id: str, payload: RenameIn) -> ConversationOut:
    conversation = lifecycle.conversation_rename(
        principal=principal_of(request), conversation_id=conversation_id, title=payload.title
    )
    return conversation_out(conversation)


@router.delete("/chat/conversations/{conversation_id}", response={204: None})
async def delete_conversation(request: HttpRequest, conversation_id: str) -> Status[None]:
    await lifecycle.conversation_delete(principal=principal_of(request), conversation_id=conversation_id)
    return Status(204, None)


@router.post("/chat/conversations/{conversation_id}/cancel", response=CancelOut)
async def cancel_turn(request: HttpRequest, conversation_id: str) -> CancelOut:
    cancelled = await turns.turn_cancel(principal=principal_of(request), conversation_id=conversation_id)
    return CancelOut(cancelled=cancelled)


async def _sse(conversation_id: str) -> AsyncIterator[bytes]:
    async for frame in get_bus().subscribe(conversation_id):
        yield f"event: {frame.type}\ndata: {frame.text()}\n\n".encode()


@router.post("/chat/stream", auth=token_or_session_releasing)
async def stream(request: HttpRequest, payload: ChatMessageIn) -> StreamingHttpResponse:
    handle = await turns.turn_start(
        principal=principal_of(request),
        message=payload.message,
        project_id=payload.projectId,
        conversation_id=payload.conversationId,
        agent_definition_id=payload.agentDefinitionId,
    )
    response = StreamingHttpResponse(_sse(handle.conversation_id), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


class RunToolCallOut(Schema):
    id: uuid.UUID
    callId: str
    toolName: str
    input: Any = None
    output: Any = None
    error: str | None = None
    durationMs: int
    stepNumber: int


class RunMessageOut(Schema):
    id: uuid.UUID
    role: str
    content: str
    toolCalls: Any = None
    stepNumber: int
    createdAt: datetime


class RunUsageOut(Schema):
    inputTokens: int
    outputTokens: int


class AgentRunOut(Schema):
    id: uuid.UUID
    agentDefinitionId: uuid.UUID | None
    conversationId: uuid.UUID | None
    status: str
    stopReason: str | None
    error: str | None
    model: str
    stepCount: int
    usage: RunUsageOut
    startedAt: datetime
    completedAt: datetime | None
    messages: list[RunMessageOut]
    toolCalls: list[RunToolCallOut]


@router.get("/agent-runs/{run_id}", response=AgentRunOut)
def get_agent_run(request: HttpRequest, run_id: str) -> AgentRunOut:
    run = selectors.agent_run_get(principal=principal_of(request), run_id=run_id)
    return AgentRunOut(
        id=run.id,
        agentDefinitionId=run.agent_definition_id,
        conversationId=run.conversation_id,
        status=run.status,
        stopReason=run.stop_reason or None,
        error=run.error or None,
        model=run.model,
        stepCount=run.step_count,
        usage=RunUsageOut(inputTokens=run.input_tokens, outputTokens=run.output_tokens),
        startedAt=run.started_at,
        completedAt=run.completed_at,
        messages=[
            RunMessageOut(
                id=m.id,
                role=m.role,
                content=m.content,
                toolCalls=m.tool_calls,
                stepNumber=m.step_number,
                createdAt=m.created_at,
            )
            for m in run.messages.all()
        ],
        toolCalls=[
            RunToolCallOut(
                id=t.id,
                callId=t.call_id,
                toolName=t.tool_name,
                input=t.input,
                output=t.output,
                error=t.error or None,
                durationMs=t.duration_ms,
                stepNumber=t.step_number,
            )
            for t in run.tool_calls.all()
        ],
    )

"""Reads of conversations and messages, always scoped to their owner."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from apps.agents.models import AgentRun
from apps.agents.selectors import agent_definitions_visible
from apps.chat.models import Conversation, Message, MessageRole
from apps.core.errors import NotFound
from apps.core.prepared import QueryTemplate
from apps.graph_tools.models import GraphChange, GraphObject
from apps.graph_tools.selectors import graph_changes_since
from apps.graph_tools.versions import graph_version_current
from apps.projects.selectors import Principal, parse_uuid, principal_of, project_list


class ConversationNotFound(NotFound):
    """conversation not found"""

    code = "conversation_not_found"


def conversation_list(*, principal: Principal, project_id: uuid.UUID | None = None) -> QuerySet[Conversation]:
    """My conversations in projects I can reach, newest first."""
    qs = Conversation.objects.filter(user_id=principal.user_id, project__in=project_list(principal=principal))
    if project_id is not None:
        qs = qs.filter(project_id=project_id)
    return qs.order_by("-updated_at", "-created_at")


def conversation_get(
    *, principal: Principal, conversation_id: object, with_project: bool = False
) -> Conversation:
    """Return one of my conversations; anyone else's (or a malformed id) is ``ConversationNotFound``.

    ``with_project`` reads its project in the same query (the turn service needs it)."""
    cid = parse_uuid(conversation_id)
    related = ("agent_definition", "project") if with_project else ("agent_definition",)
    conversation = (
        conversation_list(principal=principal).select_related(*related).filter(id=cid).first()
        if cid
        else None
    )
    if conversation is None:
        raise ConversationNotFound()
    return conversation


def _turn_conversation_query(
    *, user_id: int, token_project_id: uuid.UUID | None, conversation_id: uuid.UUID
) -> QuerySet[Conversation]:
    principal = principal_of(user_id=user_id, token_project_id=token_project_id)
    visible = agent_definitions_visible(principal=principal).filter(id=OuterRef("agent_definition_id"))
    return (
        conversation_list(principal=principal)
        .select_related("agent_definition", "project")
        .annotate(definition_visible=Exists(visible))
        .filter(id=conversation_id)
    )


_TURN_CONVERSATION = QueryTemplate(_turn_conversation_query, first=True)


def conversation_get_for_turn(*, principal: Principal, conversation_id: object) -> Conversation:
    """``conversation_get`` with its project and agent definition, and whether the principal may
    still see that definition (``definition_visible``), all in one query (the turn service's)."""
    cid = parse_uuid(conversation_id)
    conversation = (
        _TURN_CONVERSATION.first(
            user_id=principal.user_id, token_project_id=principal.token_project_id, conversation_id=cid
        )
        if cid
        else None
    )
    if conversation is None:
        raise ConversationNotFound()
    return conversation


async def aconversation_get(*, principal: Principal, conversation_id: object) -> Conversation:
    cid = parse_uuid(conversation_id)
    conversation = (
        await conversation_list(principal=principal)
        .select_related("agent_definition")
        .filter(id=cid)
        .afirst()
        if cid
        else None
    )
    if conversation is None:
        raise ConversationNotFound()
    return conversation


def message_list(*, conversation: Conversation) -> QuerySet[Message]:
    return Message.objects.filter(conversation=conversation).order_by("created_at", "id")


def _message_window_query(
    *, conversation_id: uuid.UUID, before: datetime | None, limit: int
) -> QuerySet[Message]:
    qs = Message.objects.filter(conversation_id=conversation_id)
    if before is not None:
        qs = qs.filter(created_at__lt=before)
    return qs.order_by("-created_at", "-id")[:limit]


_MESSAGE_WINDOW = QueryTemplate(_message_window_query, fixed=["limit"])


def message_window(*, conversation_id: uuid.UUID, limit: int, before: Message | None = None) -> list[Message]:
    """The newest ``limit`` messages of a conversation (older than ``before``), oldest first."""
    rows = _MESSAGE_WINDOW.rows(
        conversation_id=conversation_id, before=before.created_at if before is not None else None, limit=limit
    )
    rows.reverse()
    return rows


class AgentRunNotFound(NotFound):
    """agent run not found"""

    code = "agent_run_not_found"


def agent_run_get(*, principal: Principal, run_id: object) -> AgentRun:
    """A run of my projects; a run of a conversation is visible to that conversation's owner only."""
    rid = parse_uuid(run_id)
    run = (
        AgentRun.objects.filter(id=rid, project__in=project_list(principal=principal))
        .prefetch_related("messages", "tool_calls")
        .first()
        if rid
        else None
    )
    if run is None:
        raise AgentRunNotFound()
    if (
        run.conversation_id is not None
        and not Conversation.objects.filter(id=run.conversation_id, user_id=principal.user_id).exists()
    ):
        raise AgentRunNotFound()
    return run


def answers_graph_changed(
    *, project_id: uuid.UUID, messages: Iterable[Message]
) -> dict[uuid.UUID, dict[str, Any]]:
    """Which answers the graph moved on from: ``{message id: {"sinceVersion", "currentVersion",
    "changes"}}`` for every assistant message whose stored ``graph_version`` is older than the
    project's and one of whose used entities (``entity_ids``: its tool results and citations)
    changed since. Answers whose entities did not change are not named."""
    answers = [
        m
        for m in messages
        if m.role == MessageRole.ASSISTANT
        and isinstance(m.retrieval_context, dict)
        and isinstance(m.retrieval_context.get("graph_version"), int)
        and m.retrieval_context.get("entity_ids")
    ]
    if not answers:
        return {}
    current = graph_version_current(project_id=project_id)
    flagged: dict[uuid.UUID, dict[str, Any]] = {}
    for m in answers:
        context = m.retrieval_context
        assert isinstance(context, dict)
        version = context["graph_version"]
        if version >= current:
            continue
        changes = graph_changes_since(
            project_id=project_id, version=version, entity_ids=context["entity_ids"]
        )
        if changes:
            flagged[m.id] = {
                "sinceVersion": version,
                "currentVersion": current,
                "changes": _changes_brief(project_id, changes),
            }
    return flagged


def _changes_brief(project_id: uuid.UUID, changes: list[GraphChange]) -> list[dict[str, Any]]:
    ids = {c.entity_id or c.src_id for c in changes} | {c.dst_id for c in changes}
    names = dict(
        GraphObject.objects.filter(project_id=project_id, id__in=[i for i in ids if i]).values_list(
            "id", "name"
        )
    )

    def name_of(change: GraphChange, entity_id: uuid.UUID | None) -> str:
        for values in (change.after, change.before):
            if isinstance(values, dict) and change.entity_id and isinstance(values.get("name"), str):
                return str(values["name"])
        return names.get(entity_id, str(entity_id)) if entity_id else ""

    brief = []
    for c in changes:
        item: dict[str, Any] = {"version": c.version, "action": c.action}
        if c.entity_id:
            item |= {"entityId": str(c.entity_id), "name": name_of(c, c.entity_id)}
        else:
            item |= {
                "relationshipId": str(c.relationship_id) if c.relationship_id else None,
                "type": (c.after or c.before or {}).get("type")
                if isinstance(c.after or c.before, dict)
                else None,
                "src": name_of(c, c.src_id),
                "dst": name_of(c, c.dst_id),
            }
        brief.append(item)
    return brief

"""Build test state through the services, not hand-written SQL. Append new factories at the end."""

from __future__ import annotations

import itertools
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from apps.graph_tools.models import GraphObject, GraphRelationship
from apps.projects.models import Project
from apps.projects.services import api_token_create, membership_set, project_create

_seq = itertools.count(1)


def make_user(username: str | None = None, password: str = "pw-for-tests-1") -> AbstractBaseUser:
    username = username or f"user{next(_seq)}"
    return get_user_model().objects.create_user(username=username, password=password)


def make_project(owner: AbstractBaseUser | None = None, name: str | None = None) -> Project:
    owner = owner or make_user()
    return project_create(owner=owner, name=name or f"Project {next(_seq)}")


def add_member(project: Project, user: AbstractBaseUser, role: str = "viewer") -> None:
    membership_set(project=project, user=user, role=role)


def make_token(user: AbstractBaseUser, project: Project | None = None) -> str:
    _, secret = api_token_create(user=user, project=project)
    return secret


def make_entity(
    project: Project, key: str, type: str = "Thing", name: str | None = None, **fields: Any
) -> GraphObject:
    return GraphObject.objects.create(project=project, key=key, type=type, name=name or key.title(), **fields)


def make_relationship(
    project: Project, src: GraphObject, type: str, dst: GraphObject, **properties: Any
) -> GraphRelationship:
    return GraphRelationship.objects.create(
        project=project, src=src, type=type, dst=dst, properties=properties
    )


def make_agent_definition(project: Project, name: str | None = None, **fields: Any) -> Any:
    """An agent definition of ``project``; ``fields`` override the model defaults."""
    from apps.agents.models import AgentDefinition

    fields.setdefault("model", {"name": "scripted/test", "temperature": 0.1})
    return AgentDefinition.objects.create(project=project, name=name or f"agent-{next(_seq)}", **fields)


def make_conversation(
    user: AbstractBaseUser,
    project: Project,
    title: str = "",
    messages: list[tuple[str, str]] | None = None,
    **fields: Any,
) -> Any:
    """A conversation of ``user`` in ``project`` with ``messages`` as (role, content), oldest first."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.chat.models import Conversation, Message

    conversation = Conversation.objects.create(project=project, user=user, title=title, **fields)
    start = timezone.now()
    for n, (role, content) in enumerate(messages or []):
        Message.objects.create(
            conversation=conversation,
            role=role,
            content=content,
            created_at=start + timedelta(milliseconds=n),
        )
    return conversation


def make_agent_answer(
    conversation: Any,
    content: str,
    *,
    model: str = "scripted/test",
    input_tokens: int = 0,
    output_tokens: int = 0,
    **fields: Any,
) -> Any:
    """An assistant answer of an agent run (with its recorded usage) in ``conversation``."""
    from apps.agents.models import AgentRun, RunStatus
    from apps.chat.models import Message

    run = AgentRun.objects.create(
        project_id=conversation.project_id,
        agent_definition=conversation.agent_definition,
        conversation_id=conversation.id,
        status=RunStatus.SUCCESS,
        model=model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        final_text=content,
    )
    return Message.objects.create(
        conversation=conversation,
        role="assistant",
        content=content,
        retrieval_context={"agent_run_id": str(run.id)},
        **fields,
    )

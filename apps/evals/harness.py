"""What an eval needs before it asks: its user, its projects with their graphs, its questions, and
the model wrapped so the eval sees its raw text and usage (``apps.evals.services`` asks them)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User

from apps.agents.definitions import default_agents_install
from apps.agents.llm.base import (
    ChatMessage,
    CompatModel,
    Done,
    GenerationConfig,
    JsonConstraint,
    Provider,
    StreamEvent,
    TextDelta,
    ToolCalling,
    ToolSpec,
    Usage,
)
from apps.agents.llm.resolve import resolve_model
from apps.core.errors import ServiceError
from apps.evals import metaqa
from apps.evals.generated import generated_questions
from apps.evals.planner import PLANNER_MODEL, planner_register
from apps.evals.questions import Question
from apps.evals.sets import (
    DEFAULT_PER_KIND,
    DEFAULT_SEED,
    demo_questions,
    fictional_questions,
    fictional_world,
    world_graph_lines,
)
from apps.graph_tools.demo import demo_graph_lines
from apps.graph_tools.embeddings import get_embedder
from apps.graph_tools.importer import graph_import, graph_import_embed
from apps.graph_tools.models import GraphObject
from apps.projects.models import Project, ProjectMembership, Role
from apps.projects.services import membership_set, project_create

log = logging.getLogger("kgchat.evals")

EVAL_USER = "kgchat-eval"
SETS = ("demo", "fictional", "generated", "metaqa")
RATE_LIMIT_RETRIES = 10


class EvalError(ServiceError):
    """the eval cannot run"""

    code = "invalid_eval"


# --- setting up what an eval needs ---------------------------------------------------------------


def eval_user_ensure(*, project: Project | None = None) -> User:
    """The user eval conversations belong to (no password); a viewer of ``project`` if it is not a member."""
    user = User.objects.filter(username=EVAL_USER).first()
    if user is None:
        user = User.objects.create_user(username=EVAL_USER, password=None)
    if project is not None and not ProjectMembership.objects.filter(project=project, user=user).exists():
        membership_set(project=project, user=user, role=Role.VIEWER)
    return user


def metaqa_project_ensure() -> Project:
    """MetaQA's eval project, its knowledge base imported once through the real importer.

    The project's slug holds the file's content hash, so a changed file gets a project of its own
    and an unchanged one is reused. Its 43k entities are not embedded here (see ``apps.evals.metaqa``).
    """
    digest = metaqa.kb_digest()
    slug = f"eval-metaqa-{digest}"
    user = eval_user_ensure()
    project = Project.objects.filter(slug=slug).first()
    if project is None:
        project = project_create(owner=user, name=f"Eval: MetaQA (knowledge base {digest})", slug=slug)
    if not GraphObject.objects.filter(project=project).exists():
        started = time.perf_counter()
        result = graph_import(project=project, lines=metaqa.kb_lines())
        log.warning(
            "MetaQA: imported %d entities and %d relationships into %s in %.0f s (not embedded: semantic "
            "search covers none of them until an embedding worker has run; full-text search covers all)",
            result.entities_created, result.relationships_created, slug, time.perf_counter() - started,
        )  # fmt: skip
    default_agents_install(project=project)
    return project


def eval_project_ensure(*, set_name: str, seed: int = DEFAULT_SEED) -> Project:
    """The eval's own project of a shipped set, with its graph imported and embedded once
    (MetaQA's: imported once, not embedded)."""
    if set_name == "metaqa":
        return metaqa_project_ensure()
    if set_name == "demo":
        slug, title, lines = "eval-demo", "Eval: demo graph", lambda: demo_graph_lines()
    elif set_name == "fictional":
        slug, title = f"eval-fictional-{seed}", f"Eval: fictional world (seed {seed})"

        def lines() -> Any:
            return (json.dumps(r, ensure_ascii=False) for r in world_graph_lines(fictional_world(seed=seed)))
    else:
        raise EvalError(f"set {set_name!r} has no eval project of its own; pass --project")
    user = eval_user_ensure()
    project = Project.objects.filter(slug=slug).first()
    if project is None:
        project = project_create(owner=user, name=title, slug=slug)
    if not GraphObject.objects.filter(project=project).exists():
        result = graph_import(project=project, lines=lines())
        graph_import_embed(project_id=project.id, result=result)
    embedder = get_embedder()
    missing = GraphObject.objects.filter(project=project).exclude(embeddings__model=embedder.name)
    if missing.exists():
        from apps.graph_tools.embeddings import graph_objects_embed

        graph_objects_embed(project_id=project.id, only_missing=True)
    default_agents_install(project=project)
    return project


def eval_questions(
    *,
    set_name: str,
    project: Project,
    per_kind: int = DEFAULT_PER_KIND,
    seed: int = DEFAULT_SEED,
    per_hop: int = metaqa.DEFAULT_PER_HOP,
) -> list[Question]:
    if set_name == "metaqa":
        return metaqa.metaqa_questions(per_hop=per_hop, seed=seed)
    if set_name == "demo":
        return demo_questions(per_kind=per_kind, seed=seed)
    if set_name == "fictional":
        return fictional_questions(per_kind=per_kind, seed=seed)
    if set_name == "generated":
        return generated_questions(project_id=project.id, per_kind=per_kind, seed=seed)
    raise EvalError(f"unknown question set {set_name!r}; one of {', '.join(SETS)}")


# --- the model, watched ------------------------------------------------------------------------


@dataclass
class MeteredProvider:
    """A provider that records its raw text, its calls and their usage (one per eval question).

    It says what its ``inner`` says of how the model calls tools and takes a JSON Schema, and passes
    extra request fields on, so a small model's turn runs the same loop over it (each request of
    the loop is then one call here)."""

    inner: Provider
    name: str = ""
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    text: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.name = self.name or self.inner.name

    @property
    def tool_calling(self) -> ToolCalling:
        return getattr(self.inner, "tool_calling", "native")

    @property
    def json_constraint(self) -> JsonConstraint:
        return getattr(self.inner, "json_constraint", "response_format")

    def stream(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        *,
        extra_body: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        return self._stream(messages, tools, config, extra_body)

    async def _stream(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        extra_body: dict[str, Any] | None,
    ) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        if extra_body is not None and isinstance(self.inner, CompatModel):
            events = self.inner.stream(messages, tools, config, extra_body=extra_body)
        else:
            events = self.inner.stream(messages, tools, config)
        async for event in events:
            if isinstance(event, TextDelta):
                self.text.append(event.text)
            elif isinstance(event, Done):
                self.usage = Usage(
                    input_tokens=self.usage.input_tokens + event.usage.input_tokens,
                    output_tokens=self.usage.output_tokens + event.usage.output_tokens,
                )
            yield event


def eval_provider(model: str) -> Provider:
    """The provider of ``model`` (the perfect planner is registered on first use)."""
    if model == PLANNER_MODEL:
        planner_register()
    return resolve_model(model)

"""Run eval questions through the real turn service and score the answers.

Every question is one new conversation started with ``apps.chat.turns.service.turn_start`` — the
code SSE and the websocket use — with the project's agent definition (or none: plain RAG). The
frames are read from the frame bus like a transport does; the answer, the run's steps, tokens
and tool calls are read back from what the turn stored (``kb.chat_messages``, ``kb.agent_runs``,
``kb.agent_run_tool_calls``). The model is wrapped to see its raw text (before the citation
filter) and, in plain chat, its token usage.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from apps.agents.llm.base import ModelUnavailable, Provider
from apps.agents.models import AgentDefinition, AgentRun, AgentRunToolCall
from apps.chat.models import Conversation, Message
from apps.chat.streams.bus import get_bus
from apps.chat.turns.citations import KnownEntities, iter_entities
from apps.chat.turns.grounding import Grounding, graph_lookup, invented_spans
from apps.chat.turns.limits import RateLimited
from apps.chat.turns.service import turn_start
from apps.core.errors import ServiceError
from apps.evals import metaqa
from apps.evals.harness import (
    RATE_LIMIT_RETRIES,
    SETS,
    EvalError,
    MeteredProvider,
    eval_project_ensure,
    eval_provider,
    eval_questions,
    eval_user_ensure,
)
from apps.evals.planner import PLANNER_MODEL
from apps.evals.questions import Question
from apps.evals.scoring import answer_recall, answer_score, citation_check, cited_refs
from apps.evals.sets import DEFAULT_PER_KIND, DEFAULT_SEED
from apps.graph_tools.models import GraphObject
from apps.projects.models import Project
from apps.projects.selectors import Principal

log = logging.getLogger("kgchat.evals")


# --- one question --------------------------------------------------------------------------------


@dataclass
class QuestionResult:
    question_id: str
    set: str
    kind: str
    template: str
    question: str
    expected: list[str]
    expected_count: int | None
    mode: str
    model: str
    answer: str = ""
    score: float = 0.0
    # The share of the expected names the answer names (None: the question expects none).
    recall: float | None = None
    # What else rescoring needs: the question's slots, wrong names, yes/no answer, per-item pairs and
    # the messages asked before it in its conversation.
    slots: dict[str, str] = field(default_factory=dict)
    wrong: list[str] = field(default_factory=list)
    expected_answer: str | None = None
    pairs: list[list[Any]] = field(default_factory=list)
    prelude: list[str] = field(default_factory=list)
    cited: int = 0
    valid_citations: int = 0
    # Names of entities of the graph that nothing the turn was given holds (``grounding``): in the
    # stored answer (what the user reads), and in the model's own text before the chat's filters.
    invented_names: list[str] = field(default_factory=list)
    raw_invented_names: list[str] = field(default_factory=list)
    citation_precision: float | None = None
    tool_calls: int = 0
    # The turn's tool calls in order, ``{"tool", "arguments"}``: what the model (or its loop) looked up.
    calls: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    ttft_s: float | None = None
    done_s: float | None = None
    error: str | None = None
    conversation_id: str | None = None
    run_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@sync_to_async
def _read_turn(project: Project, message_id: str | None, run_id: uuid.UUID | None) -> dict[str, Any]:
    """What the turn stored: the answer, the run's figures, what its tools returned."""
    out: dict[str, Any] = {"answer": "", "returned": set(), "tool_calls": 0, "calls": [], "run": None}
    if message_id:
        message = Message.objects.filter(id=message_id).first()
        if message is not None:
            out["answer"] = message.content
            for e in (message.retrieval_context or {}).get("entities", []):
                out["returned"] |= {e["id"], e["key"]}
    if run_id:
        out["run"] = AgentRun.objects.filter(id=run_id).first()
        rows = AgentRunToolCall.objects.filter(run_id=run_id).order_by("step_number", "created_at")
        calls = list(rows.values_list("tool_name", "input", "output"))
        out["tool_calls"] = len(calls)
        out["calls"] = [{"tool": name, "arguments": arguments} for name, arguments, _ in calls]
        for _, _, output in calls:
            for e in iter_entities(output):
                out["returned"] |= {e["id"], e["key"]}
    return out


@sync_to_async
def _invented_names(
    project: Project, conversation_id: str, message_id: str | None, run: AgentRun | None, texts: list[str]
) -> list[list[str]]:
    """For each of ``texts``, the names of the graph's entities in it that nothing the turn was given
    holds: the entities tools returned in the conversation (its known entities), the words of its
    other messages (questions, tool results, earlier answers), the run's tool results and the
    agent's instructions (``apps.chat.turns.grounding``, as the chat checks answers)."""
    conversation = Conversation.objects.filter(id=conversation_id).first()
    known = KnownEntities(conversation.known_entities if conversation is not None else {})
    messages = Message.objects.filter(conversation_id=conversation_id)
    if message_id:
        messages = messages.exclude(id=message_id)
    given = list(messages.values_list("content", flat=True))
    if run is not None:
        given.append(run.agent_definition.system_prompt if run.agent_definition is not None else "")
        given += [json.dumps(o, default=str) for o in run.tool_calls.values_list("output", flat=True)]
    grounding = Grounding(known, given)
    lookup = graph_lookup(project.id)
    return [[text[s:e] for s, e in invented_spans(text, grounding, lookup)] for text in texts]


@sync_to_async
def _existing(project: Project, refs: list[str]) -> set[str]:
    ids = [r for r in refs if _is_uuid(r)]
    rows = GraphObject.objects.filter(project=project, id__in=ids).values_list("id", "key")
    found = {str(i) for i, _ in rows}
    found |= set(GraphObject.objects.filter(project=project, key__in=refs).values_list("key", flat=True))
    return found


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


@dataclass
class AskedTurn:
    conversation_id: str
    message_id: str | None = None
    run_id: str | None = None
    ttft_s: float | None = None
    done_s: float | None = None
    errors: list[str] = field(default_factory=list)


async def turn_ask(
    *,
    principal: Principal,
    project: Project,
    message: str,
    conversation_id: str | None,
    agent: AgentDefinition | None,
    provider: Provider,
) -> AskedTurn:
    """Ask one message through the turn service and read its frames to the end, as a transport does."""
    started = time.perf_counter()
    for attempt in range(RATE_LIMIT_RETRIES + 1):
        try:
            handle = await turn_start(
                principal=principal,
                message=message,
                project_id=str(project.id),
                conversation_id=conversation_id,
                agent_definition_id=str(agent.id) if agent is not None else None,
                provider=provider,
            )
            break
        except RateLimited:
            if attempt == RATE_LIMIT_RETRIES:
                raise
            await asyncio.sleep(7)
            started = time.perf_counter()
    turn = AskedTurn(conversation_id=handle.conversation_id)
    async for frame in get_bus().subscribe(handle.conversation_id):
        now = time.perf_counter() - started
        if frame.type == "token" and turn.ttft_s is None:
            turn.ttft_s = round(now, 3)
        elif frame.type == "error":
            turn.errors.append(f"{getattr(frame, 'code', '')}: {getattr(frame, 'error', '')}")
        elif frame.type == "done":
            turn.done_s = round(now, 3)
            turn.message_id = getattr(frame, "messageId", None)
            turn.run_id = getattr(frame, "runId", None)
    return turn


async def eval_question_run(
    *,
    principal: Principal,
    project: Project,
    question: Question,
    agent: AgentDefinition | None,
    model: str,
) -> QuestionResult:
    """Ask one question in a new conversation through the turn service; score what it answered.

    A follow-up's ``prelude`` is asked first in the same conversation (not scored, not timed)."""
    result = QuestionResult(
        question_id=question.id,
        set=question.set,
        kind=question.kind,
        template=question.template,
        question=question.text,
        expected=list(question.expected),
        expected_count=question.count,
        mode="agent" if agent is not None else "plain",
        model=model,
        slots=dict(question.slots),
        wrong=list(question.wrong),
        expected_answer=question.answer,
        pairs=[[item, list(values)] for item, values in question.pairs],
        prelude=list(question.prelude),
    )
    conversation_id: str | None = None
    for earlier in question.prelude:
        first = await turn_ask(
            principal=principal,
            project=project,
            message=earlier,
            conversation_id=conversation_id,
            agent=agent,
            provider=eval_provider(model),
        )
        conversation_id = first.conversation_id
    provider = MeteredProvider(eval_provider(model))
    turn = await turn_ask(
        principal=principal,
        project=project,
        message=question.text,
        conversation_id=conversation_id,
        agent=agent,
        provider=provider,
    )
    result.conversation_id = turn.conversation_id
    result.run_id, result.ttft_s, result.done_s = turn.run_id, turn.ttft_s, turn.done_s
    result.error = "; ".join(turn.errors) or None

    stored = await _read_turn(project, turn.message_id, uuid.UUID(result.run_id) if result.run_id else None)
    run: AgentRun | None = stored["run"]
    result.answer = stored["answer"]
    result.score = answer_score(question, result.answer) if turn.message_id else 0.0
    result.recall = answer_recall(question, result.answer) if turn.message_id else None
    raw = run.final_text if run is not None else "".join(provider.text)
    if run is not None:
        result.steps, result.input_tokens, result.output_tokens = (
            run.step_count,
            run.input_tokens,
            run.output_tokens,
        )
    else:
        result.steps = provider.calls
        result.input_tokens, result.output_tokens = provider.usage.input_tokens, provider.usage.output_tokens
    result.tool_calls = stored["tool_calls"]
    result.calls = stored["calls"]
    existing = await _existing(project, cited_refs(raw))
    check = citation_check(raw_answer=raw, existing=existing, returned=stored["returned"])
    result.cited, result.valid_citations, result.citation_precision = (
        check.cited,
        check.valid,
        check.precision,
    )
    result.invented_names, result.raw_invented_names = await _invented_names(
        project, turn.conversation_id, turn.message_id, run, [result.answer, raw]
    )
    return result


# --- a whole eval ------------------------------------------------------------------------------------


@dataclass
class EvalPlan:
    project: Project
    set_name: str
    questions: list[Question]
    agent: AgentDefinition | None
    models: list[str]
    plain: bool


def eval_models_check(models: list[str]) -> None:
    """Refuse, before anything is asked or uploaded, models that cannot be asked, and a
    ``KGCHAT_MODEL`` that would replace the ones to evaluate (``EvalError``)."""
    override = (getattr(settings, "KGCHAT_MODEL", "") or "").strip()
    if override and any(m != override for m in models):
        raise EvalError(f"KGCHAT_MODEL={override} would replace the models to evaluate; unset it")
    for model in models:
        try:
            eval_provider(model)
        except ModelUnavailable as exc:
            raise EvalError(f"model {model!r} cannot be used: {exc}", code="model_unavailable") from None


@sync_to_async
def eval_plan(
    *,
    set_name: str,
    project_ref: str | None,
    agent_name: str,
    models: list[str],
    plain: bool,
    agent: bool = True,
    per_kind: int = DEFAULT_PER_KIND,
    limit: int | None = None,
    seed: int = DEFAULT_SEED,
    per_hop: int = metaqa.DEFAULT_PER_HOP,
    kinds: list[str] | None = None,
) -> EvalPlan:
    """Set up (eval projects are created and loaded once) and choose the questions."""
    from apps.projects.selectors import project_get_by_ref

    if set_name not in SETS:
        raise EvalError(f"unknown question set {set_name!r}; one of {', '.join(SETS)}")
    if project_ref:
        try:
            project = project_get_by_ref(project_ref=project_ref)
        except ServiceError:
            raise EvalError(f"no project {project_ref!r}", code="project_not_found", status=404) from None
    else:
        project = eval_project_ensure(set_name=set_name, seed=seed)
    definition = None
    if agent:
        definition = AgentDefinition.objects.filter(project=project, name=agent_name).first()
        if definition is None:
            raise EvalError(f"project {project.slug!r} has no agent definition named {agent_name!r}")
    questions = eval_questions(
        set_name=set_name, project=project, per_kind=per_kind, seed=seed, per_hop=per_hop
    )
    if kinds:
        questions = [q for q in questions if q.kind in kinds]
    if limit is not None:
        questions = questions[:limit]
    if not questions:
        raise EvalError(f"the {set_name} set has no questions for project {project.slug!r}")
    eval_models_check(models)
    return EvalPlan(
        project=project, set_name=set_name, questions=questions, agent=definition, models=models, plain=plain
    )


async def eval_run(
    *, plan: EvalPlan, on_result: Callable[[QuestionResult], None] | None = None
) -> list[QuestionResult]:
    """Ask every question of ``plan`` of every model, with the agent and/or in plain chat."""
    user = await sync_to_async(eval_user_ensure)(project=plan.project)
    principal = Principal(user=user)
    results: list[QuestionResult] = []
    for model in plan.models:
        modes: list[AgentDefinition | None] = []
        if plan.agent is not None:
            modes.append(plan.agent)
        if plan.plain and model != PLANNER_MODEL:
            # The planner follows tools; plain chat offers none, so its answers would mean nothing.
            modes.append(None)
        for agent in modes:
            for question in plan.questions:
                result = await eval_question_run(
                    principal=principal, project=plan.project, question=question, agent=agent, model=model
                )
                results.append(result)
                if on_result is not None:
                    on_result(result)
    return results

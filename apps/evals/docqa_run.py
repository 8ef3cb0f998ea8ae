"""``make eval --set docqa`` (issue #48): the sample's passages uploaded as documents, its questions'
supporting passages sought with ``search_passages``, and its questions answered through the turn path.

- **Set-up**: a fresh project ``eval-docqa-<corpus digest>`` (an older one of that name is deleted);
  each passage uploaded through ``document_upload`` (the service the REST upload calls) as one
  plain-text document named by the passage's id, holding ``Title: text``; then the embedding
  worker's passage step (``pending_passages_embed``) until nothing waits, so search sees vectors.
- **Retrieval**: every question, through the one tool registry (``tool_call``, as REST, MCP and the
  agents call it): ``search_passages`` with the question as query, limit 5. A passage counts by its
  document's name (the sample's passage id).
- **Answers**: each chosen question is a new conversation started with the turn service, with the
  project's agent and/or in plain chat (RAG), as the other sets ask. A citation is a
  ``[label](passage:<id>)`` the citation filter kept (``kb.chat_messages.citations``); a ref in the
  model's raw answer (``entity:`` or ``passage:``) that the filter did not keep is invented.
"""

from __future__ import annotations

import re
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from asgiref.sync import sync_to_async

from apps.agents.definitions import default_agents_install
from apps.agents.models import AgentDefinition, AgentRun, AgentRunToolCall
from apps.chat.models import Message
from apps.documents.embeddings import pending_passages_embed
from apps.documents.models import Document, Passage
from apps.documents.services import document_upload
from apps.evals.docqa import (
    DocqaData,
    DocQuestion,
    all_found,
    answer_f1,
    contains_gold,
    recall_at,
)
from apps.evals.harness import EvalError, MeteredProvider, eval_provider, eval_user_ensure
from apps.evals.scoring import says_not_found
from apps.evals.services import eval_models_check, turn_ask
from apps.graph_tools.registry import tool_call
from apps.projects.models import Project
from apps.projects.selectors import Principal
from apps.projects.services import project_create, project_delete

RETRIEVAL_LIMIT = 5
_REF = re.compile(r"(?:entity|passage):([^()\s\[\]]+)")


@dataclass
class DocqaProject:
    project: Project
    documents: int
    passages: int
    upload_s: float
    embed_s: float
    # A kgchat passage's id -> its document's name (the sample's passage id).
    names: dict[str, str] = field(default_factory=dict)


def _complete(project: Project, data: DocqaData) -> bool:
    """Whether ``project`` holds every passage of the sample as a document, each passage embedded."""
    passages = Passage.objects.filter(project=project)
    return (
        Document.objects.filter(project=project).count() == len(data.passages)
        and passages.exists()
        and not passages.filter(embeddings__isnull=True).exists()
    )


def docqa_project_create(*, data: DocqaData, reuse: bool = False) -> DocqaProject:
    """A fresh eval project holding the sample's passages, uploaded and embedded (timed).

    ``reuse``: keep the project an earlier run made of the same corpus when it is complete (every
    passage uploaded and embedded; its upload and embedding then count 0 s). Its mention index is
    the one built at that upload: after a change to the recognizer, run without ``reuse``."""
    owner = eval_user_ensure()
    slug = f"eval-docqa-{data.digests['corpus.jsonl']}"
    old = Project.objects.filter(slug=slug).first()
    if old is not None and reuse and _complete(old, data):
        default_agents_install(project=old)
        return DocqaProject(
            project=old,
            documents=len(data.passages),
            passages=Passage.objects.filter(project=old).count(),
            upload_s=0.0,
            embed_s=0.0,
            names=_names(old),
        )
    if old is not None:
        project_delete(project=old)
    project = project_create(
        owner=owner, name=f"Eval: docqa (corpus {data.digests['corpus.jsonl']})", slug=slug
    )
    started = time.perf_counter()
    for passage in data.passages:
        document_upload(
            project=project,
            name=passage.id,
            data=passage.document_text().encode(),
            content_type="text/plain",
            user_id=owner.pk,
        )
    uploaded = time.perf_counter()
    while pending_passages_embed(project_id=project.id):
        pass
    embedded = time.perf_counter()
    default_agents_install(project=project)
    names = _names(project)
    return DocqaProject(
        project=project,
        documents=len(data.passages),
        passages=len(names),
        upload_s=uploaded - started,
        embed_s=embedded - uploaded,
        names=names,
    )


def _names(project: Project) -> dict[str, str]:
    return {str(i): n for i, n in Passage.objects.filter(project=project).values_list("id", "document__name")}


# --- retrieval -------------------------------------------------------------------------------------


@dataclass
class RetrievalResult:
    question_id: str
    dataset: str
    ranked: list[str]
    supporting: list[str]
    recall_2: float
    recall_5: float
    all_5: bool
    ms: float


async def docqa_retrieval(*, project: Project, questions: list[DocQuestion]) -> list[RetrievalResult]:
    """``search_passages`` with each question, through the tool registry; the supporting passages' ranks."""
    results = []
    for q in questions:
        started = time.perf_counter()
        found = await tool_call(
            project_id=project.id,
            name="search_passages",
            arguments={"query": q.question, "limit": RETRIEVAL_LIMIT},
        )
        ms = (time.perf_counter() - started) * 1000
        ranked = [str(r["document_name"]) for r in found.get("results", [])]
        results.append(
            RetrievalResult(
                question_id=q.id,
                dataset=q.dataset,
                ranked=ranked,
                supporting=list(q.supporting),
                recall_2=recall_at(ranked, q.supporting, 2),
                recall_5=recall_at(ranked, q.supporting, 5),
                all_5=all_found(ranked, q.supporting, 5),
                ms=round(ms, 1),
            )
        )
    return results


# --- answers ---------------------------------------------------------------------------------------


@dataclass
class AnswerResult:
    question_id: str
    dataset: str
    type: str
    mode: str
    model: str
    question: str
    answers: list[str]
    answer: str = ""
    correct: bool = False
    f1: float = 0.0
    not_found: bool = False
    cited: list[str] = field(default_factory=list)  # the sample's ids of the passages cited
    cites_supporting: bool = False
    invented: int = 0
    tools: list[str] = field(default_factory=list)
    # The supporting passages among the first 5 of any of the answer's search_passages calls (an
    # agent searches again with each hop's name; None: it made none, as a plain answer).
    searched_recall_5: float | None = None
    steps: int = 0
    done_s: float | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@sync_to_async
def _stored(
    message_id: str | None, run_id: str | None
) -> tuple[str, list[dict[str, Any]], str | None, list[str], int | None, list[set[str]]]:
    """The stored answer, its kept citations, the run's raw final text, its tool calls' names, its
    steps (the model calls of its agent, as ADK made them) and the document names of the first
    ``RETRIEVAL_LIMIT`` passages of each of its ``search_passages`` calls."""
    content, citations = "", []
    message = Message.objects.filter(id=message_id).first() if message_id else None
    if message is not None:
        content, citations = message.content, list(message.citations or [])
    raw, tools, steps, searched = None, [], None, []
    if run_id:
        run = AgentRun.objects.filter(id=run_id).first()
        raw, steps = (run.final_text, run.step_count) if run is not None else (None, None)
        rows = AgentRunToolCall.objects.filter(run_id=uuid.UUID(run_id)).order_by("step_number", "created_at")
        for name, output in rows.values_list("tool_name", "output"):
            tools.append(name)
            if name == "search_passages" and isinstance(output, dict):
                found = output.get("results") or []
                searched.append({str(r.get("document_name")) for r in found[:RETRIEVAL_LIMIT]})
    return content, citations, raw, tools, steps, searched


def invented_refs(raw: str, citations: list[dict[str, Any]]) -> int:
    """The refs of the raw answer (``entity:<ref>``, ``passage:<id>``) that no kept citation names."""
    kept = {str(c.get("id")) for c in citations} | {
        str(c.get("key", "")).removeprefix("passage:") for c in citations
    }
    return len({ref for ref in _REF.findall(raw) if ref not in kept})


async def docqa_answer(
    *,
    principal: Principal,
    setup: DocqaProject,
    question: DocQuestion,
    agent: AgentDefinition | None,
    model: str,
) -> AnswerResult:
    """Ask one question in a new conversation through the turn service and score what it answered."""
    provider = MeteredProvider(eval_provider(model))
    turn = await turn_ask(
        principal=principal,
        project=setup.project,
        message=question.question,
        conversation_id=None,
        agent=agent,
        provider=provider,
    )
    content, citations, raw, tools, steps, searched = await _stored(turn.message_id, turn.run_id)
    reached = set().union(*searched) if searched else set()
    cited = [setup.names.get(str(c.get("id")), "?") for c in citations if c.get("type") == "passage"]
    raw_text = raw if raw is not None else "".join(provider.text)
    return AnswerResult(
        question_id=question.id,
        dataset=question.dataset,
        type=question.type,
        mode="agent" if agent is not None else "plain",
        model=model,
        question=question.question,
        answers=list(question.answers),
        answer=content,
        correct=contains_gold(content, question.answers),
        f1=answer_f1(content, question.answers),
        not_found=says_not_found(content),
        cited=cited,
        cites_supporting=any(name in question.supporting for name in cited),
        invented=invented_refs(raw_text, citations),
        tools=tools,
        searched_recall_5=recall_at(list(reached), question.supporting, len(reached)) if searched else None,
        steps=steps if steps is not None else provider.calls,
        done_s=turn.done_s,
        error="; ".join(turn.errors) or None,
    )


async def docqa_answers(
    *,
    setup: DocqaProject,
    questions: list[DocQuestion],
    models: list[str],
    agent: AgentDefinition | None,
    plain: bool,
    on_result: Callable[[AnswerResult], None] | None = None,
) -> list[AnswerResult]:
    """Ask ``questions`` of every model, with ``agent`` (unless None) and in plain chat (if ``plain``)."""
    user = await sync_to_async(eval_user_ensure)(project=setup.project)
    principal = Principal(user=user)
    modes: list[AgentDefinition | None] = [agent] if agent is not None else []
    if plain:
        modes.append(None)
    results = []
    # Each question in every mode before the next question: a run stopped early has answered the
    # same questions in each mode.
    for model in models:
        for question in questions:
            for mode in modes:
                result = await docqa_answer(
                    principal=principal, setup=setup, question=question, agent=mode, model=model
                )
                results.append(result)
                if on_result is not None:
                    on_result(result)
    return results


# --- summaries -------------------------------------------------------------------------------------


def retrieval_summary(results: list[RetrievalResult]) -> list[dict[str, Any]]:
    rows = []
    for dataset in dict.fromkeys(r.dataset for r in results):
        of = [r for r in results if r.dataset == dataset]
        rows.append(
            {
                "dataset": dataset,
                "n": len(of),
                "recall_2": round(statistics.fmean(r.recall_2 for r in of), 3),
                "recall_5": round(statistics.fmean(r.recall_5 for r in of), 3),
                "all_5": round(sum(r.all_5 for r in of) / len(of), 3),
                "ms_p50": round(statistics.median(r.ms for r in of), 1),
            }
        )
    return rows


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def answer_summary(results: list[AnswerResult]) -> list[dict[str, Any]]:
    rows = []
    for model, mode, dataset in sorted(dict.fromkeys((r.model, r.mode, r.dataset) for r in results)):
        of = [r for r in results if (r.model, r.mode, r.dataset) == (model, mode, dataset)]
        times = [r.done_s for r in of if r.done_s is not None]
        rows.append(
            {
                "model": model,
                "mode": mode,
                "dataset": dataset,
                "n": len(of),
                "correct": round(sum(r.correct for r in of) / len(of), 3),
                "f1": round(statistics.fmean(r.f1 for r in of), 3),
                "cites_supporting": round(sum(r.cites_supporting for r in of) / len(of), 3),
                "invented": sum(r.invented for r in of),
                "not_found": round(sum(r.not_found for r in of) / len(of), 3),
                "errors": sum(1 for r in of if r.error),
                "searched_recall_5": _mean(
                    [r.searched_recall_5 for r in of if r.searched_recall_5 is not None]
                ),
                "seconds_p50": round(statistics.median(times), 1) if times else None,
            }
        )
    return rows


# --- the whole set ---------------------------------------------------------------------------------


@dataclass
class DocqaScore:
    setup: DocqaProject
    retrieval: list[RetrievalResult]
    answers: list[AnswerResult]

    def as_json(self) -> dict[str, Any]:
        return {
            "project": self.setup.project.slug,
            "documents": self.setup.documents,
            "passages": self.setup.passages,
            "upload_s": round(self.setup.upload_s, 1),
            "embed_s": round(self.setup.embed_s, 1),
            "retrieval": retrieval_summary(self.retrieval),
            "answers": answer_summary(self.answers),
            "retrieval_results": [asdict(r) for r in self.retrieval],
            "answer_results": [r.as_dict() for r in self.answers],
        }


@sync_to_async
def _agent(project: Project, name: str) -> AgentDefinition | None:
    return AgentDefinition.objects.filter(project=project, name=name).first()


async def docqa_eval(
    *,
    data: DocqaData,
    models: list[str],
    agent_name: str | None,
    plain: bool,
    answer_questions: list[DocQuestion],
    on_result: Callable[[AnswerResult], None] | None = None,
    on_retrieval: Callable[[DocqaProject, list[RetrievalResult]], None] | None = None,
    reuse: bool = False,
) -> DocqaScore:
    """Upload and embed the sample into a fresh project, score ``search_passages`` on every question,
    then ask ``answer_questions`` of each model (with the agent ``agent_name``, unless None, and in
    plain chat if ``plain``); ``reuse``: as ``docqa_project_create``'s."""
    eval_models_check(models)
    setup = await sync_to_async(docqa_project_create)(data=data, reuse=reuse)
    retrieval = await docqa_retrieval(project=setup.project, questions=list(data.questions))
    if on_retrieval is not None:
        on_retrieval(setup, retrieval)
    agent = await _agent(setup.project, agent_name) if agent_name else None
    if agent_name and agent is None:
        raise EvalError(f"project {setup.project.slug!r} has no agent definition named {agent_name!r}")
    answers: list[AnswerResult] = []
    if models and answer_questions and (agent is not None or plain):
        answers = await docqa_answers(
            setup=setup,
            questions=answer_questions,
            models=models,
            agent=agent,
            plain=plain,
            on_result=on_result,
        )
    return DocqaScore(setup=setup, retrieval=retrieval, answers=answers)

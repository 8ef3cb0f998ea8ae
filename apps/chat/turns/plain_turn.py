"""The plain branch of a turn: always retrieve, then one streamed answer with no tools (CA-3)."""

from __future__ import annotations

import uuid
from typing import Any

from apps.agents.events import ModelUsage, RunError, TextDelta
from apps.agents.history import DEFAULT_HISTORY_LIMIT
from apps.agents.loop.follow_up import previous_turn, standalone
from apps.agents.plain import Provider, plain_answer
from apps.agents.services import agent_run_plain
from apps.chat.streams.frames import ErrorFrame, TokenFrame
from apps.chat.turns.attribution import answer_sources, sources_text
from apps.chat.turns.citations import CitationFilter, is_passage
from apps.chat.turns.context import DOCUMENTS_PROMPT, PASSAGES_PROMPT, load_prompt, to_history
from apps.chat.turns.retrieval import AlwaysRetrieveStrategy, Retrieval
from apps.chat.turns.turn import Answer, Turn, emit, progress_text
from apps.graph_tools.errors import ToolError


async def run_plain_turn(turn: Turn, provider: Provider | None) -> Answer | None:
    """Always retrieve: one hybrid search and one passage search, their results in the system prompt,
    one streamed answer, stored with the record of its model call (the tokens it reported)."""
    strategy = AlwaysRetrieveStrategy()
    try:
        retrieval = await strategy.retrieve(project_id=turn.project.id, query=_query(turn))
    except ToolError as exc:
        await emit(turn, ErrorFrame(error=f"retrieval failed: {exc.message}", code="retrieval_error"))
        return None
    system_prompt = _system_prompt(turn, retrieval)
    turn.known.add_result(retrieval.result)
    turn.known.add_result(retrieval.passages_result)
    citations = CitationFilter(turn.known)
    parts: list[str] = []
    progress_text(turn, parts)

    async def send(text: str) -> None:
        if text:
            parts.append(text)
            await emit(turn, TokenFrame(token=text))

    stopped: RunError | None = None
    usage = ModelUsage()
    async for event in plain_answer(
        history=[*turn.history, to_history(turn.user_message)],
        system_prompt=system_prompt,
        model=turn.model,
        provider=provider,
        stop=turn.stop,
        max_messages=DEFAULT_HISTORY_LIMIT,
    ):
        if isinstance(event, TextDelta):
            await send(citations.feed(event.text))
        elif isinstance(event, ModelUsage):
            usage.input_tokens += event.input_tokens
            usage.output_tokens += event.output_tokens
        elif isinstance(event, RunError):
            stopped = event
    if stopped is not None and stopped.code == "llm_error":
        await emit(turn, ErrorFrame(error=stopped.message, code=stopped.code))
        return None
    await send(citations.flush())
    if stopped is None and retrieval.passages and not any(is_passage(c) for c in citations.citations):
        sources = answer_sources("".join(parts), turn.user_message.content, retrieval.passages)
        await send(citations.feed(sources_text(sources)) + citations.flush())
    text = "".join(parts)
    if stopped is not None:  # cancelled, timed out or deleted: what was said is kept
        await emit(turn, ErrorFrame(error=stopped.message, code=stopped.code))
        if not text:
            return None
    run = agent_run_plain(
        project_id=turn.project.id,
        conversation_id=turn.conversation.id,
        model=turn.model,
        usage=usage,
        stopped=stopped,
        graph_version=turn.graph_version,
        started_at=turn.user_message.created_at,
    )
    context = _context(turn, retrieval, run_id=run.id, stopped=stopped)
    return Answer(content=text, retrieval_context=context, citations=citations.citations, run=run)


def _context(
    turn: Turn, retrieval: Retrieval, *, run_id: uuid.UUID, stopped: RunError | None
) -> dict[str, Any]:
    """The answer's ``retrieval_context``: what retrieval found, and the record of its model call
    (``usage_run_id``: its tokens are read from there). Not ``agent_run_id``: clients read that as
    an agent's run to trace, and a plain answer has none to show (``done.runId`` stays null)."""
    context: dict[str, Any] = {
        "strategy": "always_retrieve",
        "usage_run_id": str(run_id),
        "model": turn.model,
        "graph_version": turn.graph_version,
        "entity_ids": [e["id"] for e in retrieval.entities],
        "entities": [{k: e[k] for k in ("id", "key", "type", "name")} for e in retrieval.entities],
    }
    if retrieval.passages:
        context["passage_ids"] = [p["id"] for p in retrieval.passages]
    if stopped is not None:
        context["stop_reason"] = "timeout" if stopped.code == "timeout" else "cancelled"
    return context


def _query(turn: Turn) -> str:
    """What retrieval searches with: the user's message, a follow-up's pronouns replaced by what
    they stand for in the previous turn ("When was he born?" → "When was Raoul Walsh born?";
    ``follow_up.standalone``). The model still reads the whole history."""
    return standalone(turn.user_message.content, *previous_turn(turn.history))


def _system_prompt(turn: Turn, retrieval: Retrieval) -> str:
    """The system prompt of a plain answer: the entities found, then the passages found. A project
    without documents keeps the prompt it always had; when the graph gave nothing and the documents
    did, only the passages are shown (``conversation_documents_prompt.md``): told "No matching
    entities were found", the 1.5B model answered that, or cited passages as ``entity:`` links, on
    the docqa dev sample."""
    passages = retrieval.passages
    if passages and not retrieval.entities:
        return load_prompt(DOCUMENTS_PROMPT).format(
            project_name=turn.project.name,
            passages=retrieval.passages_context,
            example_document=passages[0]["document_name"],
            example_passage_id=passages[0]["id"],
        )
    first = retrieval.entities[0] if retrieval.entities else None
    system_prompt = load_prompt().format(
        project_name=turn.project.name,
        context=retrieval.context,
        example_name=first["name"] if first else "Name",
        example_id=first["id"] if first else "<id>",
    )
    if passages:  # a project without documents keeps the prompt it always had
        system_prompt += load_prompt(PASSAGES_PROMPT).format(
            passages=retrieval.passages_context,
            example_document=passages[0]["document_name"],
            example_passage_id=passages[0]["id"],
        )
    return system_prompt

"""The plain branch of a turn: always retrieve, then one streamed answer with no tools (CA-3)."""

from __future__ import annotations

from typing import Any

from apps.agents.history import DEFAULT_HISTORY_LIMIT
from apps.agents.llm.base import Done, ErrorEvent, GenerationConfig, LLMError, Provider, TextDelta, ToolCall
from apps.agents.llm.resolve import resolve_model
from apps.chat.streams.bus import CANCELLED, until_cancelled
from apps.chat.streams.frames import ErrorFrame, TokenFrame
from apps.chat.turns.citations import CitationFilter
from apps.chat.turns.context import FullHistoryContextStrategy, load_prompt, to_history
from apps.chat.turns.retrieval import AlwaysRetrieveStrategy
from apps.chat.turns.turn import Answer, PartialTextSaver, Turn, emit
from apps.graph_tools.errors import ToolError


async def run_plain_turn(turn: Turn, provider: Provider | None) -> Answer | None:
    """Always retrieve: one hybrid search, its results in the system prompt, one streamed answer."""
    strategy = AlwaysRetrieveStrategy()
    try:
        retrieval = await strategy.retrieve(project_id=turn.project.id, query=turn.user_message.content)
    except ToolError as exc:
        await emit(turn, ErrorFrame(error=f"retrieval failed: {exc.message}", code="retrieval_error"))
        return None
    first = retrieval.entities[0] if retrieval.entities else None
    system_prompt = load_prompt().format(
        project_name=turn.project.name,
        context=retrieval.context,
        example_name=first["name"] if first else "Name",
        example_id=first["id"] if first else "<id>",
    )
    messages = FullHistoryContextStrategy(max_messages=DEFAULT_HISTORY_LIMIT).build_context(
        [*turn.history, to_history(turn.user_message)], system_prompt
    )

    known = turn.known
    known.add_result(retrieval.result)
    citations = CitationFilter(known)
    parts: list[str] = []
    failure: str | None = None
    cancelled = False

    saver = PartialTextSaver(turn)

    async def send(text: str) -> None:
        if text:
            parts.append(text)
            await emit(turn, TokenFrame(token=text))
            await saver.maybe_save(parts)

    try:
        llm = provider or resolve_model(turn.model)
        config = GenerationConfig(model=turn.model, temperature=0.2, stream=True)
        stream = llm.stream(messages, [], config)  # always retrieve: no tools offered
        async for event in until_cancelled(stream, turn.stop.event):
            if event is CANCELLED:
                cancelled = True
                break
            if isinstance(event, TextDelta):
                await send(citations.feed(event.text))
            elif isinstance(event, ErrorEvent):
                failure = event.error
                break
            elif isinstance(event, Done | ToolCall):
                continue
    except LLMError as exc:
        failure = str(exc)

    if failure is not None:
        await emit(turn, ErrorFrame(error=f"the model failed: {failure}", code="llm_error"))
        return None
    await send(citations.flush())
    text = "".join(parts)
    context: dict[str, Any] = {
        "strategy": "always_retrieve",
        "model": turn.model,
        "graph_version": turn.graph_version,
        "entity_ids": [e["id"] for e in retrieval.entities],
        "entities": [{k: e[k] for k in ("id", "key", "type", "name")} for e in retrieval.entities],
    }
    if cancelled:
        reason = await turn.stop.reason()
        message = "the turn was cancelled" if reason.code == "cancelled" else reason.message
        await emit(turn, ErrorFrame(error=message, code=reason.code))
        if not text:
            return None
        context["stop_reason"] = "timeout" if reason.code == "timeout" else "cancelled"
    return Answer(content=text, retrieval_context=context, citations=citations.citations)

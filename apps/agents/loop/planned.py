"""A planned turn's model steps (``turn.SmallModelTurn`` when the agent has a path tool): the
forced plan in two requests under JSON Schemas, turned into the typed paths that fit it
(``planned_paths``), and the answer from what the paths found (``planned_answer``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from apps.agents.llm.base import (
    ChatMessage,
    Done,
    ErrorEvent,
    GenerationConfig,
    StreamEvent,
    TextDelta,
    ToolSpec,
    Usage,
)
from apps.agents.loop import plan, plan_graph, plan_turn
from apps.agents.loop.candidates import plan_candidates
from apps.agents.loop.cards import AnswerLinker
from apps.agents.loop.holdback import FoundCall
from apps.agents.loop.lookups import link
from apps.agents.loop.model_requests import ModelRequests
from apps.agents.loop.prompt import answer_messages
from apps.agents.loop.values import Values


async def planned_paths(
    requests: ModelRequests,
    move: plan_turn.MakePlan,
    system: ChatMessage,
    config: GenerationConfig,
    usage: Usage,
    values: Callable[[], Awaitable[Values]],
) -> AsyncIterator[StreamEvent | list[dict[str, Any]]]:
    """The forced plan step, in two requests under JSON Schemas: the answer's shape, then the plan
    for that shape. Measured: asked together, the model almost never chose "each" or "largest";
    asked alone (12 tokens at most, the same cached prompt before it) it chose them. Yields the
    ``query_paths`` arguments of the typed paths that fit best (nothing when none fits); an error
    event ends the turn. ``values`` reads the graph's relationships' values (only for a written plan)."""
    allowed = plan.allowed_shapes(move.named, move.question)
    chosen: dict[str, Any] | None = {"answer": allowed[0]} if len(allowed) == 1 else None
    if chosen is None:
        async for item in _json(
            requests,
            [system, ChatMessage(role="user", content=f"{move.request}\nThe shape of the answer:")],
            plan.shape_schema(move.named, move.question),
            plan_graph.SHAPE_MAX_TOKENS,
            config,
            usage,
        ):
            if isinstance(item, dict):
                chosen = item
            else:
                yield item
                return
    shape = str((chosen or {}).get("answer") or "list")
    written: dict[str, Any] | None = None
    async for item in _json(
        requests,
        [system, ChatMessage(role="user", content=f"{move.request}\nShape: {shape}. The plan:")],
        plan.plan_schema(move.named, move.relationships, shape),
        plan_graph.PLAN_MAX_TOKENS,
        config,
        usage,
    ):
        if isinstance(item, dict):
            written = item
        else:
            yield item
            return
    if written:
        candidates = plan_candidates(
            {**written, "answer": shape},
            move.named,
            move.relationships,
            hinted=move.hinted,
            question=move.question,
            values=await values(),
        )
        if candidates:
            yield candidates


async def _json(
    requests: ModelRequests,
    prompt: list[ChatMessage],
    schema: dict[str, Any],
    max_tokens: int,
    config: GenerationConfig,
    usage: Usage,
) -> AsyncIterator[StreamEvent | dict[str, Any]]:
    """One request whose answer is a JSON object under ``schema`` (nothing when it is not one)."""
    text, error = await requests.constrained(prompt, "plan", schema, max_tokens, config, usage)
    if error is not None:
        yield error
        return
    found = plan.parse_plan(text)
    if found is not None:
        yield found


async def planned_answer(
    requests: ModelRequests,
    move: plan_turn.Answer,
    messages: list[ChatMessage],
    tools: list[ToolSpec],
    config: GenerationConfig,
    usage: Usage,
) -> AsyncIterator[StreamEvent]:
    """The answer from the plan's result: written out by the loop (per item, a comparison), or the
    model's from the cards, with the entities it names linked and what it left out added."""
    if move.written:
        # A per-item result is the answer as the loop lays it out (``plan_turn.group_answer``).
        yield TextDelta(text=move.written)
        yield Done(usage=usage, finish_reason="stop")
        return
    prompt = answer_messages(messages, tools, move)
    linker = AnswerLinker({e["name"]: e for e in move.entities if len(str(e["name"]).strip()) >= 3})
    said: list[str] = []
    async for piece in requests.free(prompt, [], config, usage, linker=linker):
        if isinstance(piece, FoundCall):
            continue
        if isinstance(piece, TextDelta):
            said.append(piece.text)
        yield piece
        if isinstance(piece, ErrorEvent):
            return
    answer = "".join(said)
    if missing := plan_turn.unnamed_results(answer, move.found):
        yield TextDelta(text=missing)
    if uncounted := plan_turn.count_missing(answer, move.count):
        yield TextDelta(text=uncounted)
    if move.appended:
        listed = ", ".join(link(e) for e in move.appended)
        yield TextDelta(text=f"\n\nAll {len(move.appended)} found: {listed}.")
    yield Done(usage=usage, finish_reason="stop")

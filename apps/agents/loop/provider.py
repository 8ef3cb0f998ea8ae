"""Tool calling for small models that have no reliable native tool calls (an agent loop that fits them).

``PromptedToolsProvider`` wraps an OpenAI-compatible provider (llama.cpp's server for ``local/…``,
or any ``openai/…`` model with ``OPENAI_NATIVE_TOOLS=0``) and speaks the provider protocol above
it, so ADK and the executor run unchanged. Each ``stream`` call is one agent step:

1. **The first step of a turn is forced**: the request carries a ``response_format`` JSON Schema
   that is a ``oneOf`` over the offered tools, ``{"name": <const>, "arguments": <that tool's
   parameters>}``, so the model can only write a valid call of one of them (``step_schema``).
2. **Later steps are free text**: the model either answers or writes a call object
   ``{"name", "arguments"}``. Text is streamed as it comes, except from the first ``{`` or code
   fence on, which is held back until the step ends (``CallHoldback``); if the held text contains a
   call of an offered tool (``find_call``) it becomes a ``ToolCall`` and none of it reaches the user.
3. **A step cap**: after ``max_tool_calls`` calls in a turn the model is told to answer, and a call
   that repeats one this turn already made gets one more try without it.

With a path tool (``query_paths``) the turn is planned instead (``plan_graph``, ``plan``,
``plan_turn``): the loop looks up the entities the question names, the forced step writes a plan (a
typed path of this graph) under a JSON Schema, the loop runs it and the model answers from its
result as cards. When nothing is named, the graph has no relationships or the model wrote no plan,
the steps above run as before.

The model never sees the native tool-call format: tool results are laid out as short lines
(``layout_result``) in which every entity is a citable link ``[Name](entity:<key>)``, capped in
length, and the rules say to answer only from them and to say so when they hold nothing. The
system prompt and tool list are the same for every step and turn, so the server's prompt cache
(``cache_prompt``) reads them once.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from apps.agents.llm.base import (
    ChatMessage,
    Done,
    ErrorEvent,
    GenerationConfig,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from apps.agents.loop import plan, plan_graph, plan_turn
from apps.agents.loop.candidates import plan_candidates
from apps.agents.loop.cards import AnswerLinker, card_entities
from apps.agents.loop.holdback import LOOP_PIECE, LOOP_REPEATS, CallHoldback, FoundCall, find_call, looping
from apps.agents.loop.layout import RESULT_MAX_CHARS
from apps.agents.loop.lookups import (
    TurnLookups,
    edges_tool,
    link,
    next_lookup,
    passage_search,
    passages_drawn_on,
    passages_tool,
    sources_line,
    turn_lookups,
    turn_passages,
)
from apps.agents.loop.prompt import (
    LOOKUP_ID_PREFIX,
    answer_messages,
    model_calls,
    path_move,
    prompt_messages,
    this_turn_start,
    turn_calls,
)
from apps.agents.loop.reading import Constrained, first_searches, reading_events, reading_tool
from apps.agents.loop.schema import first_step_tools, step_schema
from apps.agents.loop.values import graph_values

logger = logging.getLogger(__name__)

MAX_TOOL_CALLS_PER_TURN = 4
STEP_MAX_TOKENS = 200
ANSWER_MAX_TOKENS = 512


class ExtraBodyProvider(Protocol):
    """An OpenAI-compatible provider that passes extra request fields (``response_format``, …)."""

    name: str

    def stream(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        *,
        extra_body: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamEvent]: ...


def llguidance_grammar(schema: dict[str, Any]) -> str:
    """``schema`` as a grammar for llama.cpp's ``grammar`` field (its llguidance engine), with JSON's
    whitespace fixed to one space after ``:`` and ``,``.

    Measured: under ``response_format`` the server's own grammar let the model
    pretty-print (``{\\n  "answer": "list"\\n}``: 12 tokens; a plan 36-49), at ~140 ms a token on 2
    cores; under this grammar it wrote the same shape in 7 and plans in 24-39. MetaQA 2- and 3-hop,
    40 questions: the same 40 plans, done p50 17.7 -> 15.4 s (2-hop) and 23.7 -> 19.5 s (3-hop)."""
    fixed = {
        **schema,
        "x-guidance": {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "},
    }
    return "%llguidance {}\nstart: %json " + json.dumps(fixed)


def _without_path_tool(tools: list[ToolSpec]) -> list[ToolSpec]:
    """The tools a forced search of the earlier recipe offers: all but the path tool."""
    path = plan_graph.path_tool(tools)
    return [t for t in tools if t is not path] or tools


def _passage_search(
    messages: list[ChatMessage], tools: list[ToolSpec], lookups: TurnLookups
) -> dict[str, Any] | None:
    """The loop's own ``search_passages`` arguments this step (``lookups.passage_search``), or None;
    the planned path's queries count as finding nothing when none of them found anything."""
    start = this_turn_start(messages)
    if start >= len(messages) or passages_tool(tools) is None:
        return None
    turn = messages[start + 1 :]
    path = plan_graph.path_tool(tools)
    queries = (
        plan_turn.plan_state(turn, path.name, edges_tool(tools), LOOKUP_ID_PREFIX).queries
        if path is not None
        else []
    )
    return passage_search(
        turn,
        tools,
        messages[start].content,
        lookups,
        plan_found_nothing=bool(queries) and all(plan_turn.found_nothing(a, r) for a, r in queries),
    )


def _sources(messages: list[ChatMessage], tools: list[ToolSpec], answer: str) -> str:
    """The line citing the passages of documents an answer drew on without citing them itself
    (``lookups.passages_drawn_on``); "" without a passage search this turn."""
    start = this_turn_start(messages)
    tool = passages_tool(tools)
    if start >= len(messages) or tool is None:
        return ""
    passages = turn_passages(messages[start + 1 :], tool)
    return sources_line(passages_drawn_on(answer, messages[start].content, passages))


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


@dataclass
class PromptedToolsProvider:
    """Agent steps for a model without native tool calls, over an OpenAI-compatible ``inner``."""

    inner: ExtraBodyProvider
    name: str = ""
    max_tool_calls: int = MAX_TOOL_CALLS_PER_TURN
    result_limit: int = RESULT_MAX_CHARS
    # The loop's own look-ups of the entities a search named (``lookups``).
    look_up: bool = True
    # Plan the turn as one path query when the agent has a path tool (``plan_turn``); without it the
    # path tool is not shown to the model at all, and the turn is the search-and-look-up recipe's.
    plan_paths: bool = True
    extra_body: dict[str, Any] = field(default_factory=lambda: {"cache_prompt": True})
    # How a step's JSON Schema reaches the server: OpenAI's ``response_format`` (any compatible
    # server), or llama.cpp's own ``grammar`` field holding an llguidance JSON grammar (``local/…``,
    # ``llguidance_grammar``).
    constrain: Literal["response_format", "llguidance"] = "response_format"

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.inner.name

    def stream(
        self, messages: list[ChatMessage], tools: list[ToolSpec], config: GenerationConfig
    ) -> AsyncIterator[StreamEvent]:
        return self._step(list(messages), list(tools), config)

    async def _step(
        self, messages: list[ChatMessage], tools: list[ToolSpec], config: GenerationConfig
    ) -> AsyncIterator[StreamEvent]:
        usage = Usage()
        if not self.plan_paths:
            tools = _without_path_tool(tools)
        if (reading := reading_tool(messages, tools)) is not None:
            # The documents are read hop by hop (``reading``): searches, then the answer from them.
            async for event in reading_events(messages, reading, self._constrained_by(config, usage), usage):
                yield event
            return
        if tools and self.plan_paths and (move := path_move(messages, tools)) is not None:
            async for event in self._path(move, messages, tools, config, usage):
                yield event
            return
        # With a path tool the loop's own look-up of names comes first: only the model's calls count.
        made = model_calls(messages) if plan_graph.path_tool(tools) else turn_calls(messages)
        if tools and not made:
            # No plan this turn (or none the model could write): the forced search of the earlier recipe.
            async for event in self._forced(messages, tools, config, usage):
                yield event
            return
        turn = messages[this_turn_start(messages) + 1 :]
        # Read once a step: the results' JSON (edges with properties) is parsed here only.
        lookups = turn_lookups(turn, edges_tool(tools)) if tools else None
        if self.look_up and lookups is not None and (lookup := next_lookup(turn, tools, lookups)) is not None:
            # No model step: the loop fetches the named entity's (or its neighbour's) relationships.
            yield ToolCall(
                id=LOOKUP_ID_PREFIX + uuid.uuid4().hex[:12], name=str(edges_tool(tools)), arguments=lookup
            )
            yield Done(usage=usage, finish_reason="tool_calls")
            return
        if lookups is not None and _passage_search(messages, tools, lookups) is not None:
            # No model step: the graph did not answer, so the loop reads the documents' passages.
            question = messages[this_turn_start(messages)].content
            for call in first_searches(str(passages_tool(tools)), question):
                yield call
            yield Done(usage=usage, finish_reason="tool_calls")
            return
        async for event in self._free_step(messages, tools, config, usage, made, lookups):
            yield event

    async def _free_step(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        usage: Usage,
        made: list[tuple[str, dict[str, Any]]],
        lookups: TurnLookups | None,
    ) -> AsyncIterator[StreamEvent]:
        """A free-text step: the answer, or one more call while the cap and the look-ups allow it."""
        looked_up = self.look_up and lookups is not None and bool(lookups.cards)
        may_call = bool(tools) and len(made) < self.max_tool_calls and not looked_up
        prompt = prompt_messages(
            messages,
            tools,
            answer_now=bool(tools) and not may_call,
            result_limit=self.result_limit,
            lookups=lookups,
        )
        # After the loop's look-ups the model answers: the entities it names from the cards get links.
        linker = AnswerLinker(card_entities(lookups)) if looked_up and lookups is not None else None
        found: FoundCall | None = None
        written: list[str] = []  # the answer's text, for the passages it drew on (``_sources``)
        async for item in self._free(prompt, tools if may_call else [], config, usage, linker=linker):
            if isinstance(item, FoundCall):
                found = item
                continue
            if isinstance(item, TextDelta):
                written.append(item.text)
            yield item
            if isinstance(item, ErrorEvent):
                return
        if found is not None and (found.name, found.arguments) in made:
            # The same call again would only fetch the same result: ask once more for the answer.
            prompt = prompt_messages(messages, tools, answer_now=True, result_limit=self.result_limit)
            found = None
            async for item in self._free(prompt, [], config, usage):
                if isinstance(item, FoundCall):
                    continue
                if isinstance(item, TextDelta):
                    written.append(item.text)
                yield item
                if isinstance(item, ErrorEvent):
                    return
        if found is not None:
            yield ToolCall(id=_call_id(), name=found.name, arguments=found.arguments)
            yield Done(usage=usage, finish_reason="tool_calls")
            return
        if sources := _sources(messages, tools, "".join(written)):
            yield TextDelta(text=sources)
        yield Done(usage=usage, finish_reason="stop")

    async def _path(
        self,
        move: plan_turn.Move,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        usage: Usage,
    ) -> AsyncIterator[StreamEvent]:
        """One step of a planned turn: a look-up, the forced plan, or the answer from the plan's cards."""
        if isinstance(move, plan_turn.LookUp):
            yield ToolCall(
                id=LOOKUP_ID_PREFIX + uuid.uuid4().hex[:12], name=move.tool, arguments=move.arguments
            )
            yield Done(usage=usage, finish_reason="tool_calls")
            return
        if isinstance(move, plan_turn.MakePlan):
            async for event in self._planned_calls(move, messages, tools, config, usage):
                yield event
            return
        if move.written:
            # A per-item result is the answer as the loop lays it out (``plan_turn.group_answer``).
            yield TextDelta(text=move.written)
            yield Done(usage=usage, finish_reason="stop")
            return
        prompt = answer_messages(messages, tools, move)
        linker = AnswerLinker({e["name"]: e for e in move.entities if len(str(e["name"]).strip()) >= 3})
        said: list[str] = []
        async for piece in self._free(prompt, [], config, usage, linker=linker):
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

    async def _planned_calls(
        self,
        move: plan_turn.MakePlan,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        usage: Usage,
    ) -> AsyncIterator[StreamEvent]:
        """The plan's ``query_paths`` calls, or the earlier recipe's forced search when no plan fits."""
        candidates: list[dict[str, Any]] = []
        async for item in self._plan(move, messages, tools, config, usage):
            if isinstance(item, list):
                candidates = item
            else:
                yield item
                return
        tool = plan_graph.path_tool(tools)
        if candidates and tool is not None:
            # The typed paths that fit the plan equally well, run together (ADK runs the calls
            # of one step); the answer reads the first that finds something.
            for arguments in candidates:
                yield ToolCall(id=_call_id(), name=tool.name, arguments=arguments)
            yield Done(usage=usage, finish_reason="tool_calls")
            return
        async for event in self._forced(messages, tools, config, usage):
            yield event

    async def _plan(
        self,
        move: plan_turn.MakePlan,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        usage: Usage,
    ) -> AsyncIterator[StreamEvent | list[dict[str, Any]]]:
        """The forced plan step, in two requests under JSON Schemas: the answer's shape, then the plan
        for that shape. Measured: asked together, the model almost never chose "each" or "largest";
        asked alone (12 tokens at most, the same cached prompt before it) it chose them. Yields the
        ``query_paths`` arguments of the typed paths that fit best (nothing when none fits); an error
        event ends the turn."""
        system = prompt_messages(messages, tools, result_limit=self.result_limit)[0]
        allowed = plan.allowed_shapes(move.named, move.question)
        chosen: dict[str, Any] | None = {"answer": allowed[0]} if len(allowed) == 1 else None
        if chosen is None:
            async for item in self._json(
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
        async for item in self._json(
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
                values=await graph_values(),
            )
            if candidates:
                yield candidates

    async def _json(
        self,
        prompt: list[ChatMessage],
        schema: dict[str, Any],
        max_tokens: int,
        config: GenerationConfig,
        usage: Usage,
    ) -> AsyncIterator[StreamEvent | dict[str, Any]]:
        """One request whose answer is a JSON object under ``schema`` (nothing when it is not one)."""
        text, error = await self._constrained(prompt, "plan", schema, max_tokens, config, usage)
        if error is not None:
            yield error
            return
        found = plan.parse_plan(text)
        if found is not None:
            yield found

    async def _forced(
        self, messages: list[ChatMessage], tools: list[ToolSpec], config: GenerationConfig, usage: Usage
    ) -> AsyncIterator[StreamEvent]:
        """The forced search of the earlier recipe: a call of any tool but the path tool.

        Its prompt is every step's (all of ``tools``, the path tool's plan rules included); only
        its schema leaves the path tool out. Measured: with a prompt of its own (no
        path tool, no plan rules), the server's prompt cache kept that prompt in place of the
        planning one, and read ~2,000 tokens anew (50-60 s) at the recipe's answer or at the next
        question's plan."""
        prompt = prompt_messages(messages, tools, result_limit=self.result_limit)
        callable_tools = _without_path_tool(tools)
        schema = step_schema(first_step_tools(callable_tools))
        text, error = await self._constrained(prompt, "tool_call", schema, STEP_MAX_TOKENS, config, usage)
        if error is not None:
            yield error
            return
        found = find_call(text, [t.name for t in callable_tools])
        if found is None:
            yield ErrorEvent(
                error=f"the model {self.name} wrote no valid tool call under the step schema: {text[:200]!r}"
            )
            return
        if found.name == passages_tool(tools):
            # The model chose the documents: the loop reads them its own way (``reading``).
            for call in first_searches(found.name, messages[this_turn_start(messages)].content):
                yield call
        else:
            yield ToolCall(id=_call_id(), name=found.name, arguments=found.arguments)
        yield Done(usage=usage, finish_reason="tool_calls")

    def _constrained_by(self, config: GenerationConfig, usage: Usage) -> Constrained:
        """``_constrained`` with this step's ``config`` and ``usage``, for ``reading``."""

        async def constrained(
            prompt: list[ChatMessage], name: str, schema: dict[str, Any], max_tokens: int
        ) -> tuple[str, ErrorEvent | None]:
            return await self._constrained(prompt, name, schema, max_tokens, config, usage)

        return constrained

    async def _constrained(
        self,
        prompt: list[ChatMessage],
        name: str,
        schema: dict[str, Any],
        max_tokens: int,
        config: GenerationConfig,
        usage: Usage,
    ) -> tuple[str, ErrorEvent | None]:
        """One unstreamed request whose answer must follow the JSON ``schema`` (the server enforces
        it, temperature 0): its text, or the provider's error; its tokens are added to ``usage``."""
        body: dict[str, Any] = {**self.extra_body}
        if self.constrain == "llguidance":
            body["grammar"] = llguidance_grammar(schema)
        else:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "strict": True, "schema": schema},
            }
        forced = config.model_copy(
            update={"stream": False, "max_output_tokens": max_tokens, "temperature": 0.0}
        )
        parts: list[str] = []
        async for event in self.inner.stream(prompt, [], forced, extra_body=body):
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, Done):
                usage.input_tokens += event.usage.input_tokens
                usage.output_tokens += event.usage.output_tokens
            elif isinstance(event, ErrorEvent):
                return "".join(parts), event
        return "".join(parts), None

    async def _free(
        self,
        prompt: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        usage: Usage,
        *,
        linker: AnswerLinker | None = None,
    ) -> AsyncIterator[StreamEvent | FoundCall]:
        """Stream one free-text generation; a call of one of ``tools`` in it is yielded as ``FoundCall``."""
        limit = min(config.max_output_tokens or ANSWER_MAX_TOKENS, ANSWER_MAX_TOKENS)
        free = config.model_copy(update={"stream": True, "max_output_tokens": limit})
        holdback = CallHoldback()
        names = [t.name for t in tools]
        events = self.inner.stream(prompt, [], free, extra_body=dict(self.extra_body))
        written = ""
        try:
            async for event in events:
                if isinstance(event, TextDelta):
                    written += event.text
                    if looping(written[-LOOP_PIECE[1] * LOOP_REPEATS :]):
                        logger.warning(
                            "the answer repeats itself; generation stopped after %d characters", len(written)
                        )
                        break
                    shown = holdback.feed(event.text)
                    if shown and linker is not None:
                        shown = linker.feed(shown)
                    if shown:
                        yield TextDelta(text=shown)
                    if names and holdback.holding and (call := find_call(holdback.held, names)):
                        yield call  # the call is complete: stop generating
                        return
                elif isinstance(event, Done):
                    usage.input_tokens += event.usage.input_tokens
                    usage.output_tokens += event.usage.output_tokens
                elif isinstance(event, ErrorEvent):
                    yield event
                    return
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
        rest = holdback.held
        if linker is not None:
            rest = linker.feed(rest) + linker.flush()
        if rest:
            yield TextDelta(text=rest)

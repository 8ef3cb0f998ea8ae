"""An agent turn of a small model that has no reliable native tool calls: the loop that runs it.

The executor chooses it (``turn_steps``) for a model whose provider says ``tool_calling="prompted"``
(llama.cpp's server for ``local/…``, or any ``openai/…`` model with ``OPENAI_NATIVE_TOOLS=0``), with
the turn's project and graph version passed in. ADK drives it as it drives a model, through the
model adapter: each model call of the run is one step of this loop (``SmallModelTurn.stream``), so
ADK's session, the audit and the frames see ordinary tool calls and text. A step:

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

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from apps.agents.llm.base import (
    ChatMessage,
    CompatModel,
    Done,
    ErrorEvent,
    GenerationConfig,
    JsonConstraint,
    Provider,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from apps.agents.loop import plan_graph, plan_turn
from apps.agents.loop.cards import AnswerLinker, card_entities
from apps.agents.loop.follow_up import standalone_question
from apps.agents.loop.holdback import FoundCall, find_call
from apps.agents.loop.layout import RESULT_MAX_CHARS
from apps.agents.loop.lookups import (
    TurnLookups,
    edges_tool,
    next_lookup,
    passage_search,
    passages_drawn_on,
    passages_tool,
    sources_line,
    turn_lookups,
    turn_passages,
)
from apps.agents.loop.model_requests import ModelRequests
from apps.agents.loop.planned import planned_answer, planned_paths
from apps.agents.loop.prompt import (
    LOOKUP_ID_PREFIX,
    model_calls,
    path_move,
    prompt_messages,
    this_turn_start,
    turn_calls,
)
from apps.agents.loop.reading import first_searches, reading_events, reading_tool
from apps.agents.loop.schema import first_step_tools, step_schema
from apps.agents.loop.values import Values, graph_values

MAX_TOOL_CALLS_PER_TURN = 4
STEP_MAX_TOKENS = 200


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


def turn_steps(provider: Provider, *, project_id: uuid.UUID | None, graph_version: int | None) -> Provider:
    """How an agent turn runs on ``provider``: this loop for a model that calls tools only under a
    JSON Schema (its provider says ``tool_calling="prompted"``), over that provider and reading the
    graph of ``project_id`` at ``graph_version``; any other model runs the turn's steps itself."""
    if not isinstance(provider, CompatModel) or provider.tool_calling != "prompted":
        return provider
    return SmallModelTurn(
        inner=provider,
        project_id=project_id,
        graph_version=graph_version,
        plan_paths=settings.KGCHAT_SMALL_MODEL_PLANS,
        constrain=provider.json_constraint,
    )


@dataclass
class SmallModelTurn:
    """The steps of an agent turn for a model without native tool calls, over an OpenAI-compatible
    ``inner``; ADK calls ``stream`` once a step, as it calls a model."""

    inner: CompatModel
    # The graph the turn works on (the plan step reads its relationships' values, ``values``).
    project_id: uuid.UUID | None = None
    graph_version: int | None = None
    name: str = ""
    max_tool_calls: int = MAX_TOOL_CALLS_PER_TURN
    result_limit: int = RESULT_MAX_CHARS
    # The loop's own look-ups of the entities a search named (``lookups``).
    look_up: bool = True
    # Plan the turn as one path query when the agent has a path tool (``plan_turn``); without it the
    # path tool is not shown to the model at all, and the turn is the search-and-look-up recipe's.
    plan_paths: bool = True
    extra_body: dict[str, Any] = field(default_factory=lambda: {"cache_prompt": True})
    # How a step's JSON Schema reaches the server (``model_requests.llguidance_grammar``).
    constrain: JsonConstraint = "response_format"

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.inner.name
        self.requests = ModelRequests(inner=self.inner, constrain=self.constrain, extra_body=self.extra_body)

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
            async for event in reading_events(
                messages, reading, self.requests.constrained_by(config, usage), usage
            ):
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
            for call in first_searches(str(passages_tool(tools)), standalone_question(messages)):
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
        async for item in self.requests.free(prompt, tools if may_call else [], config, usage, linker=linker):
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
            async for item in self.requests.free(prompt, [], config, usage):
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
        async for event in planned_answer(self.requests, move, messages, tools, config, usage):
            yield event

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
        system = prompt_messages(messages, tools, result_limit=self.result_limit)[0]
        async for item in planned_paths(self.requests, move, system, config, usage, self._values):
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

    async def _values(self) -> Values:
        return await graph_values(self.project_id, self.graph_version)

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
        text, error = await self.requests.constrained(
            prompt, "tool_call", schema, STEP_MAX_TOKENS, config, usage
        )
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
            for call in first_searches(found.name, standalone_question(messages)):
                yield call
        else:
            yield ToolCall(id=_call_id(), name=found.name, arguments=found.arguments)
        yield Done(usage=usage, finish_reason="tool_calls")

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
from typing import Any, Protocol

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
from apps.agents.loop.holdback import CallHoldback, FoundCall, find_call
from apps.agents.loop.layout import RESULT_MAX_CHARS
from apps.agents.loop.lookups import AnswerLinker, card_entities, edges_tool, next_lookup, turn_lookups
from apps.agents.loop.prompt import LOOKUP_ID_PREFIX, prompt_messages, this_turn_start, turn_calls
from apps.agents.loop.schema import first_step_tools, step_schema

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
    extra_body: dict[str, Any] = field(default_factory=lambda: {"cache_prompt": True})

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
        made = turn_calls(messages)
        if tools and not made:
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
        async for item in self._free(prompt, tools if may_call else [], config, usage, linker=linker):
            if isinstance(item, FoundCall):
                found = item
                continue
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
                yield item
                if isinstance(item, ErrorEvent):
                    return
        if found is not None:
            yield ToolCall(id=_call_id(), name=found.name, arguments=found.arguments)
            yield Done(usage=usage, finish_reason="tool_calls")
            return
        yield Done(usage=usage, finish_reason="stop")

    async def _forced(
        self, messages: list[ChatMessage], tools: list[ToolSpec], config: GenerationConfig, usage: Usage
    ) -> AsyncIterator[StreamEvent]:
        prompt = prompt_messages(messages, tools, result_limit=self.result_limit)
        body = {
            **self.extra_body,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "tool_call",
                    "strict": True,
                    "schema": step_schema(first_step_tools(tools)),
                },
            },
        }
        forced = config.model_copy(
            update={"stream": False, "max_output_tokens": STEP_MAX_TOKENS, "temperature": 0.0}
        )
        parts: list[str] = []
        async for event in self.inner.stream(prompt, [], forced, extra_body=body):
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, Done):
                usage.input_tokens += event.usage.input_tokens
                usage.output_tokens += event.usage.output_tokens
            elif isinstance(event, ErrorEvent):
                yield event
                return
        text = "".join(parts)
        found = find_call(text, [t.name for t in tools])
        if found is None:
            yield ErrorEvent(
                error=f"the model {self.name} wrote no valid tool call under the step schema: {text[:200]!r}"
            )
            return
        yield ToolCall(id=_call_id(), name=found.name, arguments=found.arguments)
        yield Done(usage=usage, finish_reason="tool_calls")

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
        try:
            async for event in events:
                if isinstance(event, TextDelta):
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

"""The small-model loop's two kinds of request to the model: one whose answer a JSON Schema
constrains (``ModelRequests.constrained``: a forced call, a plan, a reading), and one streamed in
free text (``ModelRequests.free``: the answer, or a call written in it, held back while it streams).

The model is an OpenAI-compatible provider (``CompatModel``): a schema reaches its server as
``response_format`` or as an llguidance grammar (``llguidance_grammar``), as the provider says.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from apps.agents.llm.base import (
    ChatMessage,
    CompatModel,
    Done,
    ErrorEvent,
    GenerationConfig,
    JsonConstraint,
    StreamEvent,
    TextDelta,
    ToolSpec,
    Usage,
)
from apps.agents.loop.cards import AnswerLinker
from apps.agents.loop.holdback import LOOP_PIECE, LOOP_REPEATS, CallHoldback, FoundCall, find_call, looping
from apps.agents.loop.reading import Constrained

logger = logging.getLogger(__name__)

ANSWER_MAX_TOKENS = 512


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


@dataclass
class ModelRequests:
    """Requests to ``inner`` for one turn's steps, with the fields every request carries."""

    inner: CompatModel
    constrain: JsonConstraint = "response_format"
    extra_body: dict[str, Any] = field(default_factory=lambda: {"cache_prompt": True})

    def constrained_by(self, config: GenerationConfig, usage: Usage) -> Constrained:
        """``constrained`` with this step's ``config`` and ``usage``, for ``reading``."""

        async def constrained(
            prompt: list[ChatMessage], name: str, schema: dict[str, Any], max_tokens: int
        ) -> tuple[str, ErrorEvent | None]:
            return await self.constrained(prompt, name, schema, max_tokens, config, usage)

        return constrained

    async def constrained(
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

    async def free(
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

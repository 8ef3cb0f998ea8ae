"""Answers as JSON under a schema: one model call whose answer must follow a JSON Schema, parsed,
for the apps above that need data from a model rather than prose (document extraction), as
``plain.py`` is for plain answers. They never import the providers (``apps.agents.llm``) themselves
(import-linter's "models only through agents" contract): ``ChatMessage``, ``LLMError`` and
``Provider`` are named here for them.

``structured_model`` resolves a model (or takes a caller's provider, e.g. a test's scripted one);
its ``answer`` asks one ``JsonQuestion``. How the schema is enforced depends on the provider: the
offline default (llama.cpp, ``local/…``) gets it as a grammar of compact JSON
(``json_answers.compact_json_grammar``: no whitespace, half the tokens of the indented answer it
writes under ``response_format``, each list item a row of its values, read back by
``rows_as_objects``); any other OpenAI-compatible server gets it as ``response_format``; any other
provider is offered one tool whose parameters are the schema, and its call is the answer. The
caller words its prompt for the shape asked (``StructuredModel.in_rows``).
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from typing import Any

from apps.agents.json_answers import (
    MOST_ITEMS,
    LoopGuard,
    compact_json_grammar,
    json_cut_short,
    json_in,
    log,
    rows_as_objects,
)
from apps.agents.llm.base import (
    ChatMessage,
    Done,
    ErrorEvent,
    GenerationConfig,
    LLMError,
    Provider,
    TextDelta,
    ToolCall,
    ToolSpec,
)
from apps.agents.llm.resolve import resolve_model

__all__ = ["ChatMessage", "JsonQuestion", "LLMError", "Provider", "StructuredModel", "structured_model"]

# The offline default's models (``local/…``) are served by llama.cpp, which takes a grammar.
LLAMA_CPP_PREFIX = "local/"
# A resumed answer's next list has at most this many items for each item of the lists before it,
# and at least this many.
RESUMED_ITEMS_PER_NAMED = 2
RESUMED_ITEMS_LEAST = 10


@dataclass(frozen=True)
class JsonQuestion:
    """What one structured call asks: the messages, the JSON Schema of the answer (an object), its
    name (``response_format``'s), the tool offered to providers without constrained output (name
    and description), the most tokens the answer may take and the most items a list may have."""

    messages: list[ChatMessage]
    schema: dict[str, Any]
    name: str
    tool_name: str
    tool_description: str
    max_tokens: int
    most_items: int = MOST_ITEMS


def _openai_compatible(provider: Provider) -> Any | None:
    """The OpenAI-compatible client under ``provider`` (its ``stream`` takes request fields,
    ``extra_body``), or None for any other provider."""
    inner = getattr(provider, "inner", provider)
    return inner if "extra_body" in inspect.signature(inner.stream).parameters else None


@dataclass(frozen=True)
class StructuredModel:
    """A model asked for JSON answers (``structured_model``)."""

    provider: Provider

    @property
    def in_rows(self) -> bool:
        """Whether it is asked under ``compact_json_grammar`` (llama.cpp, the offline default), whose
        list items are rows of values; any other is asked for the schema's objects."""
        inner = _openai_compatible(self.provider)
        return inner is not None and str(getattr(inner, "name", "")).startswith(LLAMA_CPP_PREFIX)

    async def answer(self, question: JsonQuestion) -> Any:
        """One call under the question's schema; the parsed answer, or ``LLMError``.

        An answer that loops (``json_answers.LoopGuard``) is stopped; under the compact grammar, one
        that looped in a list other than the last is then resumed once: the model is given its
        answer before the loop as the start of its reply (llama.cpp continues an assistant message
        that ends the messages), under a grammar that closes that list and asks the rest
        (``compact_json_grammar``'s ``resume_after``)."""
        provider, schema = self.provider, question.schema
        config = GenerationConfig(
            model=provider.name, temperature=0.0, max_output_tokens=question.max_tokens, stream=True
        )
        rows = self.in_rows
        # A map (no fixed keys) has no list to resume with: a loop anywhere in it is its last list's.
        keys = list(schema.get("properties", {}))
        guard = LoopGuard(last=keys[-1] if keys else None)
        body = {"grammar": compact_json_grammar(schema, most=question.most_items)} if rows else None
        arguments = await _answer(provider, question, config, body, guard)
        if arguments is not None:
            return arguments
        if guard.cut is not None and rows and guard.inside in keys[:-1]:
            cut = guard.cut
            # A passage states about as many relationships as it names entities: a resumed list
            # may have twice as many (once, a resume that never repeated an item wrote 40 facts
            # between the neighbours its passage listed until the token cap).
            named = sum(len(v) for v in (json_cut_short(cut) or {}).values() if isinstance(v, list))
            most = min(question.most_items, max(RESUMED_ITEMS_LEAST, RESUMED_ITEMS_PER_NAMED * named))
            resume = {"grammar": compact_json_grammar(schema, resume_after=guard.inside, most=most)}
            resumed = [*question.messages, ChatMessage(role="assistant", content=cut)]
            guard = LoopGuard(last=keys[-1])
            guard.looping(cut)
            await _answer(provider, question, config, resume, guard, messages=resumed)
        answer = json_in(guard.cut if guard.cut is not None else guard.answer)
        return rows_as_objects(answer, schema) if rows else answer


def structured_model(model: str, *, provider: Provider | None = None) -> StructuredModel:
    """The model named ``model`` (``LLMError`` when there is no such model), or ``provider`` when a
    caller gives one (a test's scripted model)."""
    return StructuredModel(provider=provider if provider is not None else resolve_model(model))


async def _answer(
    provider: Provider,
    question: JsonQuestion,
    config: GenerationConfig,
    body: dict[str, Any] | None,
    guard: LoopGuard,
    *,
    messages: list[ChatMessage] | None = None,
) -> dict[str, Any] | None:
    """Stream one reply into ``guard`` (stopped when it loops); a tool call's arguments, if the
    provider answered with one. With ``body`` (a grammar), llama.cpp is asked with it; any other
    OpenAI-compatible server gets the schema as ``response_format``; any other provider the tool."""
    inner = _openai_compatible(provider)
    messages = question.messages if messages is None else messages
    started = time.monotonic()
    arguments: dict[str, Any] | None = None
    if inner is not None:
        body = body or {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": question.name, "strict": True, "schema": question.schema},
            }
        }
        events = inner.stream(messages, [], config, extra_body=body)
    else:
        tool = ToolSpec(
            name=question.tool_name, description=question.tool_description, parameters=question.schema
        )
        events = provider.stream(messages, [tool], config)
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                if guard.looping(event.text):
                    log.warning("the model's answer repeats itself; stopped after %d characters", guard.read)
                    break
            elif isinstance(event, ToolCall) and event.name == question.tool_name:
                arguments = event.arguments
            elif isinstance(event, ErrorEvent):
                retryable = event.status is None or event.status == 429 or event.status >= 500
                raise LLMError(event.error, upstream_status=event.status, retryable=retryable)
            elif isinstance(event, Done):
                # Where a call's time goes: almost all of it is the answer's tokens (docs/evals.md).
                log.info(
                    "%s call: %d prompt tokens, %d answer tokens, %.1f s (%s)",
                    question.name,
                    event.usage.input_tokens,
                    event.usage.output_tokens,
                    time.monotonic() - started,
                    event.finish_reason,
                )
                break
    finally:
        # Stopped early, the reply's stream is closed now (and its HTTP request with it), so the
        # server stops decoding it.
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    return arguments

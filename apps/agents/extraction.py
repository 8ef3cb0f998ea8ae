"""Ask a model for one passage's entities and relationships (issue 26 item 3), the agents' side.

``extraction_step`` claims the next passage waiting (``graph_tools.documents.extraction``), asks
the change set's model under the JSON Schema built from the project's types, and stores the
answer, or records the failure (retried with backoff, then marked and skipped). The background
worker runs it (``AgentsConfig.ready`` registers it with ``graph_tools.jobs``); tests and the
``extract_document`` command call it directly, with a scripted model if they like.

Constrained output: an OpenAI-compatible server (the offline default included) gets the schema as
``response_format``; any other provider is offered one tool, ``record_extraction``, whose
parameters are the schema, and its call is the answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import logging
import re
import time
from typing import Any

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
from apps.graph_tools.documents.extraction import (
    ClaimedPassage,
    ExtractionSpec,
    extraction_claim,
    extraction_fail,
    extraction_output_clean,
    extraction_spec,
    extraction_store,
)

log = logging.getLogger("kgchat.extraction")

TOOL_NAME = "record_extraction"
MAX_OUTPUT_TOKENS = 1500


def extraction_prompt(passage: ClaimedPassage, spec: ExtractionSpec) -> list[ChatMessage]:
    """The model's messages for one passage: what to extract, under which types, then the text."""
    lines = [
        "You read one passage of a document and list the entities it names and the relationships it states "
        "between them, for a knowledge graph.",
        "Rules: give each entity its full proper name as the passage gives it (resolve 'it', 'its capital', "
        "'the city' to the entity they mean); list only facts the passage states; every relationship's "
        "source and target must be names from your entities list; list each entity once.",
    ]
    if spec.entity_types:
        lines.append("Entity types: " + ", ".join(spec.entity_types) + ".")
    if spec.relationships:
        lines.append(
            "Relationships (source type -TYPE-> target type): "
            + "; ".join(f"{s} -{t}-> {d}" for t, s, d in spec.relationships)
            + "."
        )
    if spec.free_types:
        lines.append("You may use other types when none of these fits.")
    lines.append('Answer with JSON only: {"entities": [...], "relationships": [...]}.')
    return [
        ChatMessage(role="system", content="\n".join(lines)),
        ChatMessage(role="user", content=f"Document: {passage.document_name}\n\nPassage:\n{passage.text}"),
    ]


def _json_in(text: str) -> Any:
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match is None:
        raise LLMError(f"the model answered no JSON object: {text[:200]!r}", retryable=True)
    try:
        return json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise LLMError(f"the model's JSON could not be read: {exc}", retryable=True) from None


async def extraction_ask(provider: Provider, messages: list[ChatMessage], spec: ExtractionSpec) -> Any:
    """One model call under the schema; the parsed answer, or ``LLMError``."""
    config = GenerationConfig(
        model=provider.name, temperature=0.0, max_output_tokens=MAX_OUTPUT_TOKENS, stream=True
    )
    inner = getattr(provider, "inner", provider)
    parts: list[str] = []
    arguments: dict[str, Any] | None = None
    started = time.monotonic()
    if "extra_body" in inspect.signature(inner.stream).parameters:
        body = {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "extraction", "strict": True, "schema": spec.schema},
            }
        }
        events = inner.stream(messages, [], config, extra_body=body)  # type: ignore[call-arg]
    else:
        tool = ToolSpec(
            name=TOOL_NAME,
            description="Record the passage's entities and relationships.",
            parameters=spec.schema,
        )
        events = provider.stream(messages, [tool], config)
    async for event in events:
        if isinstance(event, TextDelta):
            parts.append(event.text)
        elif isinstance(event, ToolCall) and event.name == TOOL_NAME:
            arguments = event.arguments
        elif isinstance(event, ErrorEvent):
            retryable = event.status is None or event.status == 429 or event.status >= 500
            raise LLMError(event.error, status=event.status, retryable=retryable)
        elif isinstance(event, Done):
            # Where a passage's time goes: almost all of it is the answer's tokens (session 12).
            log.info(
                "extraction call: %d prompt tokens, %d answer tokens, %.1f s (%s)",
                event.usage.input_tokens,
                event.usage.output_tokens,
                time.monotonic() - started,
                event.finish_reason,
            )
            break
    return arguments if arguments is not None else _json_in("".join(parts))


def _run(coroutine: Any) -> Any:
    """Run ``coroutine`` to its end from synchronous code: here, or in a thread of its own when this
    thread already runs an event loop (a caller inside an async server or test)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def extraction_step(*, provider: Provider | None = None) -> int:
    """Extract one waiting passage; return 1 if one was claimed, 0 when none waits."""
    passage = extraction_claim()
    if passage is None:
        return 0
    spec = extraction_spec(project_id=passage.project_id)
    try:
        llm = provider or resolve_model(passage.model)
        output = _run(extraction_ask(llm, extraction_prompt(passage, spec), spec))
    except LLMError as exc:
        state = extraction_fail(passage_id=passage.id, error=str(exc), attempt=passage.attempt)
        log.warning(
            "extraction of passage %s failed (attempt %d, now %s): %s",
            passage.id,
            passage.attempt,
            state,
            exc,
        )
        return 1
    extraction_store(passage_id=passage.id, output=extraction_output_clean(output, spec, text=passage.text))
    return 1


def extraction_run_until_idle(*, provider: Provider | None = None, limit: int = 100_000) -> int:
    """Extract waiting passages until none waits now (a passage in backoff waits); return how many."""
    done = 0
    while done < limit and extraction_step(provider=provider):
        done += 1
    return done

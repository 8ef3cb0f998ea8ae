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
from apps.agents.llm.prompted.layout import RESULT_MAX_CHARS, clip, entities, layout_result, words

MAX_TOOL_CALLS_PER_TURN = 4
HISTORY_MESSAGES = 4
MESSAGE_MAX_CHARS = 600
STEP_MAX_TOKENS = 200
ANSWER_MAX_TOKENS = 512
FENCE = "```"
# The forced steps: while fewer than MIN_CALLS calls were made in a turn a step must call a tool;
# then, while fewer than FORCED_CALLS, it must call a tool or choose ANSWER_CHOICE; later steps are
# free text. Measured on the demo set: offered the answer after one search, the model took it every
# time, also for two-hop and count questions whose answer the search did not hold.
MIN_CALLS = 2
FORCED_CALLS = 3
ANSWER_CHOICE = "answer"
ANSWER_NOW = (
    "\n\nNo more tool calls: write the answer now in plain sentences (no JSON), from the results above. "
    "Write every entity you "
    "name as its link copied from the results, [Name](entity:<key>), for example "
    "[Portugal](entity:country:PT)."
)
NEXT_STEP = (
    "\n\nDo the results above hold all that the question asks? If something is still missing, call "
    f'a tool for it; if not, reply {{"name": "{ANSWER_CHOICE}"}}.'
)


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


def step_schema(tools: Sequence[ToolSpec], *, may_answer: bool = False) -> dict[str, Any]:
    """The JSON Schema of a forced step: a call of exactly one of ``tools`` with valid arguments.

    With ``may_answer`` the step may instead choose ``{"name": "answer"}`` (``ANSWER_CHOICE``):
    the answer itself is then written in a free-text step of its own, streamed.
    """
    branches: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {"name": {"const": t.name}, "arguments": arguments_schema(t.parameters)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    if may_answer:
        branches.append(
            {
                "type": "object",
                "properties": {"name": {"const": ANSWER_CHOICE}},
                "required": ["name"],
                "additionalProperties": False,
            }
        )
    return {"oneOf": branches}


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


ANSWER_FIELDS = ("answer", "text", "content", "response")


def unwrap_answer(text: str) -> str:
    """Held-back text that is one JSON object carrying the answer as a string field: that string.

    Measured: told to answer after steps written as JSON calls, the 1.5B wrote its answer as
    ``{"name": "answer", "answer": "The capital of Togo is Lome."}``; the user should read the sentence.
    Any other text is returned as it is.
    """
    stripped = text.strip()
    if stripped.startswith(FENCE):
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        return text
    if isinstance(value, dict):
        for key in ANSWER_FIELDS:
            if isinstance(value.get(key), str) and value[key].strip():
                return str(value[key])
    return text


PLAIN_ANSWER_REMINDER = (
    "You chose to answer. Write the answer now as one or two plain sentences from the results above, "
    "not as JSON."
)


def is_bare_answer_choice(text: str) -> bool:
    """Whether held-back text is only the answer choice of the step schema, with no sentence in it."""
    stripped = text.strip()
    if stripped.startswith(FENCE):
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        return False
    return isinstance(value, dict) and value.get("name") == ANSWER_CHOICE and unwrap_answer(text) == text


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
            f"- Start with {search} on the name of the entity the question is about: only that name "
            '(for example "Lisbon"), never the whole question.'
        )
    if edges:
        lines.append(
            "- When the answer is a fact of another entity that a result names (the X of the Y in which "
            "Z lies: the country a city lies in, then that country's capital), look that entity up too "
            f"({search or edges} with its name, or {edges} with its key) before answering."
        )
        lines.append(
            f"- For a list or a count, call {edges} with the entity's key: it gives each kind of "
            "relationship as one line with the number of entities in parentheses."
        )
    return "\nHow to look things up:\n" + "\n".join(lines) if lines else ""


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
            "After a tool result, either call another tool the same way, or reply "
            f'{{"name": "{ANSWER_CHOICE}"}} when the results hold all that the question asks, and then '
            "write the answer." + _strategy(tools)
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
        "knowledge graph, and nothing more. Answer briefly: a how-many question with the number "
        "first, a which-question with every entity that fits."
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
    names = [str(e["name"]) for e in entities(data)]
    if not names:
        return None
    query_words = words(query)
    return any(words(name) in query_words for name in names if words(name).strip())


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


def searches_missed(messages: Sequence[ChatMessage]) -> bool:
    """Whether this turn's calls were all searches and none found a result named in its query.

    Then a second look-up is not forced: measured on the demo set, asked about an invented country
    and made to search again, the model answered with the nearest result ("Oslo").
    """
    start = _this_turn_start(messages)
    queries = {
        c.id: c.arguments.get("query")
        for m in messages[start + 1 :]
        if m.role == "assistant"
        for c in m.tool_calls
    }
    results = [m for m in messages[start + 1 :] if m.role == "tool"]
    if not results:
        return False
    for result in results:
        query = queries.get(result.tool_call_id or "")
        if not isinstance(query, str):
            return False
        try:
            empty = not entities(json.loads(result.content))
        except (json.JSONDecodeError, TypeError):
            return False
        if not empty and _names_in(result.content, query) is not False:
            return False
    return True


def edges_tool(tools: Sequence[ToolSpec]) -> str | None:
    """The offered tool that lists one entity's relationships: it needs only ``entity_id`` and takes a direction."""
    for tool in tools:
        required = set(tool.parameters.get("required") or [])
        if required == {"entity_id"} and "direction" in (tool.parameters.get("properties") or {}):
            return tool.name
    return None


def exact_hit_lookup(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> dict[str, Any] | None:
    """The arguments of the relationships call for the exact-name hit of this turn's last search, if due.

    When the last tool result of the turn answers a call with a ``query`` and one of its entities is
    named exactly the query (case and accents aside), or else named by whole words in it, the loop looks up that entity's relationships
    itself instead of asking the model for the next step: measured, the small model mostly copied
    its first search when made to call again. Not when the entity's relationships were already
    fetched this turn (at most once per entity), nor when no edges tool is offered.
    """
    tool = edges_tool(tools)
    start = _this_turn_start(messages)
    if tool is None or start >= len(messages) or messages[-1].role != "tool":
        return None
    last = messages[-1]
    calls = {c.id: c for m in messages[start + 1 :] if m.role == "assistant" for c in m.tool_calls}
    call = calls.get(last.tool_call_id or "")
    query = call.arguments.get("query") if call is not None else None
    if not isinstance(query, str) or not words(query).strip():
        return None
    try:
        hits = entities(json.loads(last.content))
    except (json.JSONDecodeError, TypeError):
        return None
    hit = next((e for e in hits if words(str(e["name"])) == words(query)), None)
    if hit is None:
        # Measured: the 1.5B searched "Togo capital" despite the prompt; the hit named in the query
        # (the longest such name, the first of equals) is the entity it is about.
        named = [e for e in hits if words(str(e["name"])).strip() and words(str(e["name"])) in words(query)]
        hit = max(named, key=lambda e: len(words(str(e["name"]))), default=None)
    if hit is None:
        return None
    looked_up = {c.arguments.get("entity_id") for c in calls.values() if c.name == tool}
    if hit["key"] in looked_up:
        return None
    return {"entity_id": hit["key"]}


def _one_more_call(tools: Sequence[ToolSpec]) -> str:
    search = _first_with_required(tools, "query")
    edges = _first_with_required(tools, "entity_id")
    ways = []
    if search:
        ways.append(f"{search} with the name of an entity a result mentions that the question is about")
    if edges:
        ways.append(f"{edges} with the key of the entity found, for its relationships and their counts")
    return (
        "\n\nMake one more call for what the answer still needs: " + ", or ".join(ways) + "." if ways else ""
    )


def prompt_messages(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    *,
    answer_now: bool = False,
    forced: bool = False,
    must_call: bool = False,
    repeated: tuple[str, dict[str, Any]] | None = None,
    result_limit: int = RESULT_MAX_CHARS,
) -> list[ChatMessage]:
    """The conversation as the small model reads it: plain roles, calls as JSON, results laid out.

    ``answer_now`` tells it to answer; ``forced`` (a step under the step schema after a result)
    asks whether the results hold the answer or what is still missing; ``must_call`` (a forced
    step that must call a tool) says which call may complete the results, and that ``repeated``
    was made already.
    """
    instructions = "\n".join(m.content for m in messages if m.role == "system")
    out = [ChatMessage(role="system", content=system_prompt(instructions, tools))]
    start = _this_turn_start(messages)
    earlier = [
        ChatMessage(role=m.role, content=clip(m.content, MESSAGE_MAX_CHARS))
        for m in messages[:start]
        if m.role in {"user", "assistant"} and m.content.strip()
    ]
    out.extend(earlier[-HISTORY_MESSAGES:])
    if start < len(messages):
        out.append(ChatMessage(role="user", content=messages[start].content))
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    queries = {c.id: c.arguments.get("query") for m in messages for c in m.tool_calls}
    for message in messages[start + 1 :]:
        if message.role == "assistant":
            calls = [json.dumps({"name": c.name, "arguments": c.arguments}) for c in message.tool_calls]
            text = "\n".join([message.content.strip(), *calls]).strip()
            if text:
                out.append(ChatMessage(role="assistant", content=text))
        elif message.role == "tool":
            name = names.get(message.tool_call_id or "", message.name or "tool")
            text = f"Result of {name}:\n{layout_result(message.content, result_limit)}"
            query = queries.get(message.tool_call_id or "")
            if isinstance(query, str) and _names_in(message.content, query) is False:
                text += f'\n(No result has a name that appears in "{query}".)'
            out.append(ChatMessage(role="user", content=text))
    if answer_now and out[-1].role == "user":
        out[-1] = ChatMessage(role="user", content=out[-1].content + ANSWER_NOW)
    elif forced and out[-1].role == "user" and len(out) > 1 and out[-2].role == "assistant":
        out[-1] = ChatMessage(role="user", content=out[-1].content + NEXT_STEP)
    elif must_call and out[-1].role == "user" and len(out) > 1 and out[-2].role == "assistant":
        again = ""
        if repeated is not None:
            call = json.dumps({"name": repeated[0], "arguments": repeated[1]})
            again = f"\n\nYou already made the call {call}; its result is above. Make a different call."
        out[-1] = ChatMessage(role="user", content=out[-1].content + again + _one_more_call(tools))
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
    forced_calls: int = FORCED_CALLS
    min_calls: int = MIN_CALLS
    result_limit: int = RESULT_MAX_CHARS
    look_up_exact_hits: bool = True
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
        may_call = bool(tools) and len(made) < self.max_tool_calls
        lookup = exact_hit_lookup(messages, tools) if may_call and self.look_up_exact_hits else None
        if lookup is not None:
            # No model step: the loop itself fetches the relationships of the entity searched for.
            yield ToolCall(id=_call_id(), name=str(edges_tool(tools)), arguments=lookup)
            yield Done(usage=usage, finish_reason="tool_calls")
            return
        if may_call and len(made) < self.forced_calls and ANSWER_CHOICE not in {t.name for t in tools}:
            must_call = len(made) < self.min_calls and not searches_missed(messages)
            repeated: FoundCall | None = None
            # A step that must call and repeats a call gets one more try, told so (measured: the 1.5B
            # often copies its first search); otherwise a repeat or the answer choice answers.
            for _attempt in range(2 if must_call else 1):
                chosen: FoundCall | None = None
                async for item in self._forced(
                    messages, tools, config, usage, may_answer=not must_call, repeated=repeated
                ):
                    if isinstance(item, FoundCall):
                        chosen = item
                        continue
                    yield item
                    if isinstance(item, ErrorEvent):
                        return
                if chosen is None or chosen.name == ANSWER_CHOICE:
                    break
                if (chosen.name, chosen.arguments) not in made:
                    yield ToolCall(id=_call_id(), name=chosen.name, arguments=chosen.arguments)
                    yield Done(usage=usage, finish_reason="tool_calls")
                    return
                repeated = chosen
            # The model chose to answer, or to repeat a call (the same result again): answer now.
            async for event in self._answer(messages, tools, config, usage):
                yield event
            return
        prompt = prompt_messages(
            messages, tools, answer_now=bool(tools) and not may_call, result_limit=self.result_limit
        )
        found: FoundCall | None = None
        async for item in self._free(prompt, tools if may_call else [], config, usage):
            if isinstance(item, FoundCall):
                found = item
                continue
            yield item
            if isinstance(item, ErrorEvent):
                return
        if found is not None and found.name == ANSWER_CHOICE:
            async for event in self._answer(messages, tools, config, usage, remind=True):
                yield event
            return
        if found is not None and (found.name, found.arguments) in made:
            # The same call again would only fetch the same result: ask once more for the answer.
            async for event in self._answer(messages, tools, config, usage):
                yield event
            return
        if found is not None:
            yield ToolCall(id=_call_id(), name=found.name, arguments=found.arguments)
            yield Done(usage=usage, finish_reason="tool_calls")
            return
        yield Done(usage=usage, finish_reason="stop")

    async def _answer(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        usage: Usage,
        *,
        remind: bool = False,
    ) -> AsyncIterator[StreamEvent]:
        """A free-text step told to answer now; a call written in it stays text.

        An answer that is only the step schema's answer choice (``{"name": "answer"}``, no sentence)
        is not shown: the step is asked once more, for plain sentences (measured: the 1.5B wrote it
        after choosing to answer, and users read the JSON). ``remind``: that already happened once.
        """
        prompt = prompt_messages(messages, tools, answer_now=True, result_limit=self.result_limit)
        reminder = ChatMessage(role="user", content=PLAIN_ANSWER_REMINDER)
        for attempt in range(1 if remind else 2):
            bare_choice = False
            steered = [*prompt, reminder] if remind or attempt else prompt
            async for item in self._free(steered, [], config, usage):
                if isinstance(item, FoundCall):
                    bare_choice = bare_choice or item.name == ANSWER_CHOICE
                    continue
                yield item
                if isinstance(item, ErrorEvent):
                    return
            if not bare_choice:
                break
        yield Done(usage=usage, finish_reason="stop")

    async def _forced(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        usage: Usage,
        *,
        may_answer: bool,
        repeated: FoundCall | None = None,
    ) -> AsyncIterator[StreamEvent | FoundCall]:
        """One step under the step schema: a ``FoundCall`` (of a tool, or of ``ANSWER_CHOICE``)."""
        prompt = prompt_messages(
            messages,
            tools,
            result_limit=self.result_limit,
            forced=may_answer,
            must_call=not may_answer,
            repeated=(repeated.name, repeated.arguments) if repeated else None,
        )
        body = {
            **self.extra_body,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "tool_call",
                    "strict": True,
                    "schema": step_schema(tools, may_answer=may_answer),
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
        names = [t.name for t in tools] + ([ANSWER_CHOICE] if may_answer else [])
        found = find_call(text, names)
        if found is None:
            yield ErrorEvent(
                error=f"the model {self.name} wrote no valid tool call under the step schema: {text[:200]!r}"
            )
            return
        yield found

    async def _free(
        self, prompt: list[ChatMessage], tools: list[ToolSpec], config: GenerationConfig, usage: Usage
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
        if holdback.held:
            if is_bare_answer_choice(holdback.held):
                yield FoundCall(name=ANSWER_CHOICE, arguments={}, start=0, end=len(holdback.held))
            else:
                yield TextDelta(text=unwrap_answer(holdback.held))

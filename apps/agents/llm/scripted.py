"""A provider that replays scripted responses: for tests and benches, never for users.

Each call to ``stream`` consumes the next *turn* of the script. A turn is a list of items —
``TextDelta``, ``ToolCall``, ``ErrorEvent``, ``Done`` and ``Delay`` (sleep before the next item) —
or a callable ``(messages, tools) -> list of items`` that answers from the request. A turn that
ends without ``Done`` or ``ErrorEvent`` gets a ``Done`` whose usage is estimated from the text.
A provider built with a ``responder`` never runs out: every call is answered by it.

With a ``Pace`` the provider streams like a served model: each call's first text delta or tool
call comes ``first_token_seconds`` after the call, the following ones ``1 / tokens_per_second``
apart, on a schedule fixed at the call (a late wake-up is made up, not added to the next gap).

Scripts can be selected by model name: ``register_script("demo", provider)`` makes
``resolve_model("scripted/demo")`` return that provider (see ``apps.agents.llm.resolve``).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.agents.llm.base import (
    ChatMessage,
    Done,
    ErrorEvent,
    GenerationConfig,
    LLMError,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` before the next scripted item (to test cancellation and timing)."""

    seconds: float


@dataclass(frozen=True)
class Pace:
    """Stream at a served model's rate: the first item after ``first_token_seconds``, then
    ``tokens_per_second`` (each text delta or tool call counts as one token)."""

    first_token_seconds: float = 0.5
    tokens_per_second: float = 50.0

    def due(self, index: int) -> float:
        """Seconds after the call at which its ``index``-th (0-based) delta or tool call is due."""
        return self.first_token_seconds + index / self.tokens_per_second


@dataclass(frozen=True)
class Raise:
    """Raise ``LLMError(message)`` from the stream instead of yielding an event."""

    message: str


ScriptItem = TextDelta | ToolCall | ErrorEvent | Done | Delay | Raise
# A responder may answer with an iterator: its items are then made as they are streamed.
Responder = Callable[[list[ChatMessage], list[ToolSpec]], Iterable[ScriptItem]]
Turn = Sequence[ScriptItem] | Responder


@dataclass
class ScriptedCall:
    """What the provider was asked, recorded for assertions."""

    messages: list[ChatMessage]
    tools: list[ToolSpec]
    config: GenerationConfig


_call_ids = itertools.count(1)


def text(*chunks: str, usage: Usage | None = None) -> list[ScriptItem]:
    """Build a turn that streams ``chunks`` and finishes."""
    items: list[ScriptItem] = [TextDelta(text=c) for c in chunks]
    if usage is not None:
        items.append(Done(usage=usage))
    return items


def tool_call(name: str, arguments: dict[str, Any] | None = None, *, id: str | None = None) -> ToolCall:
    """Build one scripted tool call; the id defaults to a fresh ``call_<n>``."""
    return ToolCall(id=id or f"call_{next(_call_ids)}", name=name, arguments=arguments or {})


def error(message: str, status: int | None = None) -> list[ScriptItem]:
    return [ErrorEvent(error=message, status=status)]


@dataclass
class ScriptedProvider:
    """Replay ``turns`` one per call; ``responder`` answers every call once the turns run out.

    ``pace`` spaces the deltas and tool calls of every call in time; ``clock`` and ``sleep`` are
    what it reads and waits with (tests pass their own).
    """

    turns: list[Turn] = field(default_factory=list)
    responder: Responder | None = None
    name: str = "scripted"
    calls: list[ScriptedCall] = field(default_factory=list)
    pace: Pace | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def stream(
        self, messages: list[ChatMessage], tools: list[ToolSpec], config: GenerationConfig
    ) -> AsyncIterator[StreamEvent]:
        return self._stream(messages, tools, config)

    async def _stream(
        self, messages: list[ChatMessage], tools: list[ToolSpec], config: GenerationConfig
    ) -> AsyncIterator[StreamEvent]:
        started = self.clock()
        index = len(self.calls)
        self.calls.append(ScriptedCall(messages=list(messages), tools=list(tools), config=config))
        turn: Turn | None
        if index < len(self.turns):
            turn = self.turns[index]
        else:
            turn = self.responder
        if turn is None:
            yield ErrorEvent(error=f"scripted provider {self.name!r} has no response for call {index + 1}")
            return
        items = turn(messages, tools) if callable(turn) else turn
        finished = False
        out_chars = 0
        paced = 0
        for item in items:
            if isinstance(item, Delay):
                await self.sleep(item.seconds)
                continue
            if isinstance(item, Raise):
                raise LLMError(item.message)
            if self.pace is not None and isinstance(item, (TextDelta, ToolCall)):
                wait = started + self.pace.due(paced) - self.clock()
                paced += 1
                if wait > 0:
                    await self.sleep(wait)
            if isinstance(item, TextDelta):
                out_chars += len(item.text)
            yield item
            if isinstance(item, (Done, ErrorEvent)):
                finished = True
                break
        if not finished:
            in_chars = sum(len(m.content) for m in messages)
            yield Done(usage=Usage(input_tokens=in_chars // 4, output_tokens=out_chars // 4))


_SCRIPTS: dict[str, ScriptedProvider] = {}


def register_script(name: str, provider: ScriptedProvider) -> None:
    """Make ``resolve_model("scripted/<name>")`` return ``provider`` (tests and benches)."""
    provider.name = f"scripted/{name}"
    _SCRIPTS[name] = provider


def unregister_script(name: str) -> None:
    _SCRIPTS.pop(name, None)


def get_script(name: str) -> ScriptedProvider | None:
    return _SCRIPTS.get(name)

"""``ModelAdapter``: an ADK ``BaseLlm`` that drives one of this app's providers.

Stream semantics (spec "Model adapter streams LLM responses"): with ``stream=False`` the
provider's events are accumulated into exactly one final ``LlmResponse``; with ``stream=True``
every text delta is also yielded as a partial response, and the final one carries the whole
text and the function calls. A provider error is yielded at once as an ``LlmResponse`` with
``error_code``/``error_message`` and iteration stops.

With ``coalesce_seconds`` > 0, text deltas that arrive within that window after the last
partial response are merged into the next one (the first delta goes out at once; merged text
waits at most the window, even if the model stalls). When the event loop runs behind, the window
grows with its lag (at most ``MAX_HOLD``): see ``coalesce_text``. ADK handles every partial response on its
own (callbacks, telemetry, an event), which costs far more than a model's one-word delta; the
text, its order and the final response are unchanged.

With a ``text_sink``, a streamed text delta is handed to it instead of being yielded as a partial
response: ADK then sees one response per model call (the final one, as without streaming) and
does its per-response work (an event, the callbacks, telemetry, one task and a hand-over between
its node and its runner) twice per turn instead of once per delta. The sink is awaited before
the next response is yielded, so the streamed text still precedes the call's tool calls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import ConfigDict

from apps.agents.llm.base import (
    ChatMessage,
    Done,
    ErrorEvent,
    GenerationConfig,
    LLMError,
    Provider,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    ToolSpec,
)
from apps.agents.tool_results import model_text
from apps.core.loop_lag import loop_lag

LLM_ERROR_CODE = "llm_error"


def call_id(fc: types.FunctionCall | types.FunctionResponse) -> str:
    """The call's own id, or the synthetic ``call_<name>`` when it has none."""
    return fc.id or f"call_{fc.name or ''}"


def system_text(config: types.GenerateContentConfig | None) -> str:
    """The SystemInstruction's text parts joined with newlines ("" when absent)."""
    instruction: Any = config.system_instruction if config else None
    if instruction is None:
        return ""
    if isinstance(instruction, str):
        return instruction
    if isinstance(instruction, types.Content):
        items: list[Any] = list(instruction.parts or [])
    elif isinstance(instruction, list):
        items = instruction
    else:
        items = [instruction]
    texts: list[str] = []
    for item in items:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, types.Part) and item.text and not item.thought:
            texts.append(item.text)
    return "\n".join(texts)


def convert_messages(contents: list[types.Content]) -> list[ChatMessage]:
    """Map ADK contents to provider messages, keeping FunctionCall ids (fallback ``call_<name>``).

    This is where the model is given tool results: each one as the model's copy (at most
    ``KGCHAT_TOOL_RESULT_MAX_CHARS``, ``apps.agents.tool_results``), whether it was just returned,
    decided, replayed from a resumed run's stored events or read from the history."""
    out: list[ChatMessage] = []
    for content in contents:
        texts: list[str] = []
        calls: list[ToolCallRequest] = []
        results: list[ChatMessage] = []
        for part in content.parts or []:
            if part.thought:
                continue
            if part.function_call is not None:
                fc = part.function_call
                calls.append(
                    ToolCallRequest(id=call_id(fc), name=fc.name or "", arguments=dict(fc.args or {}))
                )
            elif part.function_response is not None:
                fr = part.function_response
                results.append(
                    ChatMessage(
                        role="tool",
                        content=model_text(fr.response),
                        tool_call_id=call_id(fr),
                        name=fr.name,
                    )
                )
            elif part.text:
                texts.append(part.text)
        text = "".join(texts)
        if content.role == "model":
            if text or calls:
                out.append(ChatMessage(role="assistant", content=text, tool_calls=calls))
            out.extend(results)
        else:
            out.extend(results)
            if text:
                out.append(ChatMessage(role="user", content=text))
    return out


def _schema_to_json(schema: types.Schema) -> dict[str, Any]:
    data = schema.model_dump(mode="json", exclude_none=True)

    def lower(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: (v.lower() if k == "type" and isinstance(v, str) else lower(v)) for k, v in node.items()
            }
        if isinstance(node, list):
            return [lower(v) for v in node]
        return node

    result: dict[str, Any] = lower(data)
    return result


def tool_specs(config: types.GenerateContentConfig | None) -> list[ToolSpec]:
    """The request's function declarations as provider tool specs."""
    specs: list[ToolSpec] = []
    for tool in (config.tools if config else None) or []:
        for decl in getattr(tool, "function_declarations", None) or []:
            if decl.parameters_json_schema is not None:
                params = dict(decl.parameters_json_schema)
            elif decl.parameters is not None:
                params = _schema_to_json(decl.parameters)
            else:
                params = {"type": "object", "properties": {}}
            specs.append(
                ToolSpec(name=decl.name or "", description=decl.description or "", parameters=params)
            )
    return specs


def request_messages(llm_request: LlmRequest) -> list[ChatMessage]:
    """SystemInstruction first (when present), then the converted contents."""
    messages = convert_messages(llm_request.contents)
    system = system_text(llm_request.config)
    if system:
        messages.insert(0, ChatMessage(role="system", content=system))
    return messages


def _error(message: str, code: str = LLM_ERROR_CODE) -> LlmResponse:
    return LlmResponse(error_code=code, error_message=message, turn_complete=True)


class ModelAdapter(BaseLlm):
    """ADK's view of a provider. ``model`` is the served model name."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    provider: Any
    temperature: float | None = None
    max_output_tokens: int | None = None
    coalesce_seconds: float = 0.0
    # Streamed text goes here instead of into partial responses (see the module's docstring).
    text_sink: Callable[[str], Awaitable[None]] | None = None

    @classmethod
    def for_provider(
        cls,
        provider: Provider,
        *,
        temperature: float | None = None,
        coalesce_seconds: float = 0.0,
        text_sink: Callable[[str], Awaitable[None]] | None = None,
    ) -> ModelAdapter:
        return cls(
            model=provider.name,
            provider=provider,
            temperature=temperature,
            coalesce_seconds=coalesce_seconds,
            text_sink=text_sink,
        )

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        messages = request_messages(llm_request)
        tools = tool_specs(llm_request.config)
        temperature = self.temperature
        if llm_request.config and llm_request.config.temperature is not None:
            temperature = llm_request.config.temperature
        config = GenerationConfig(
            model=self.model, temperature=temperature, max_output_tokens=self.max_output_tokens, stream=stream
        )
        texts: list[str] = []
        calls: list[types.Part] = []
        try:
            events = self.provider.stream(messages, tools, config)
            if stream and self.coalesce_seconds > 0:
                events = coalesce_text(events, self.coalesce_seconds)
            async for event in events:
                if isinstance(event, TextDelta):
                    if not event.text:
                        continue
                    texts.append(event.text)
                    if stream and self.text_sink is not None:
                        await self.text_sink(event.text)
                    elif stream:
                        yield LlmResponse(
                            content=types.Content(role="model", parts=[types.Part(text=event.text)]),
                            partial=True,
                        )
                elif isinstance(event, ToolCall):
                    fc = types.FunctionCall(
                        id=event.id or f"call_{event.name}", name=event.name, args=event.arguments
                    )
                    calls.append(types.Part(function_call=fc))
                elif isinstance(event, ErrorEvent):
                    yield _error(event.error)
                    return
                elif isinstance(event, Done):
                    text = "".join(texts)
                    parts = ([types.Part(text=text)] if text or not calls else []) + calls
                    yield LlmResponse(
                        content=types.Content(role="model", parts=parts),
                        partial=False,
                        turn_complete=True,
                        finish_reason=types.FinishReason.STOP,
                        model_version=self.model,
                        usage_metadata=types.GenerateContentResponseUsageMetadata(
                            prompt_token_count=event.usage.input_tokens,
                            candidates_token_count=event.usage.output_tokens,
                            total_token_count=event.usage.input_tokens + event.usage.output_tokens,
                        ),
                    )
                    return
        except LLMError as exc:
            yield _error(str(exc))
            return
        yield _error(f"the model stream of {self.model} ended without finishing")


class _End:
    """The provider's stream is over (or failed with ``error``)."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


# The longest merged text is held back, however far behind the loop is: a frame per turn at
# least every quarter of a second.
MAX_HOLD = 0.25
# The hold is this many times the loop's lag: a frame then waits about as long as a few passes of
# a loop that is behind (bench.stream_load at 200 turns, 1x against 5x: first-token p99 8.8 / 8.3 s
# -> 5.8 / 6.5 s, inter-token p50 48 / 10 ms -> 4 / 0.2 ms, CPU per turn 0.052 / 0.053 -> 0.044 /
# 0.051 s).
LAG_FACTOR = 5


async def coalesce_text(
    events: AsyncIterator[StreamEvent],
    window: float,
    *,
    lag: Callable[[], float] | None = None,
    max_hold: float = MAX_HOLD,
) -> AsyncIterator[StreamEvent]:
    """Yield ``events`` with the text deltas that follow a sent one within its hold merged.

    The hold is ``window``, or ``LAG_FACTOR`` times the event loop's lag when that is longer (at
    most ``max_hold``): ``lag`` returns the lag, by default the running loop's probe
    (``apps.core.loop_lag``). On an
    idle loop a delta that comes ``window`` or more after the last text sent goes at once; when
    the loop is behind, each frame carries everything that came during a few lags, so a
    loaded process sends fewer, larger frames instead of falling further behind.

    A reader task moves the provider's events into a queue as fast as they come; each time this
    generator wakes it takes *everything* queued. While text is held back, the reader does not
    wake it for more text (only a loop timer at the end of the hold, or a non-text event, which
    the merged text precedes), so a held delta costs the reader's step alone.
    """
    merger = _TextMerger(events, window, lag=lag, max_hold=max_hold)
    try:
        with merger.measuring():
            while True:
                if not merger.items:
                    await merger.wait()
                for event in merger.take():
                    yield event
                if merger.ended is not None:
                    if merger.ended.error is not None:
                        raise merger.ended.error
                    return
    finally:
        await merger.close()


class _TextMerger:
    """The state of one ``coalesce_text``: the reader task, the queue it fills, the held text."""

    def __init__(
        self,
        events: AsyncIterator[StreamEvent],
        window: float,
        *,
        lag: Callable[[], float] | None,
        max_hold: float,
    ) -> None:
        self.events, self.window, self.lag, self.max_hold = events, window, lag, max_hold
        self.loop = asyncio.get_running_loop()
        self.probe = loop_lag(self.loop) if lag is None else None
        self.items: deque[StreamEvent | _End] = deque()
        self.waiter: asyncio.Future[None] | None = None
        self.holding = False
        self.pending: list[str] = []
        self.sent_at = -float("inf")
        self.timer: asyncio.TimerHandle | None = None
        self.ended: _End | None = None
        self.reader = asyncio.ensure_future(self._pump())

    def measuring(self) -> contextlib.AbstractContextManager[Any]:
        return self.probe.hold() if self.probe is not None else contextlib.nullcontext()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def _pump(self) -> None:
        try:
            async for event in self.events:
                self.items.append(event)
                if not self.holding or not isinstance(event, TextDelta):
                    self._wake()
        except Exception as exc:  # handed to the consumer, which raises it in order
            self.items.append(_End(exc))
        else:
            self.items.append(_End())
        self._wake()

    def _hold(self) -> float:
        behind = (self.probe.value if self.probe is not None else self.lag()) * LAG_FACTOR  # type: ignore[misc]
        return self.window if behind <= self.window else min(behind, max(self.window, self.max_hold))

    async def wait(self) -> None:
        """Sleep until the reader queues something, or until held text is due."""
        self.waiter = self.loop.create_future()
        if self.pending:
            self.holding = True
            self.timer = self.loop.call_at(self.sent_at + self._hold(), self._wake)
        await self.waiter
        self.waiter, self.holding = None, False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _flush(self) -> TextDelta:
        merged = TextDelta(text="".join(self.pending))
        self.pending.clear()
        self.sent_at = self.loop.time()
        return merged

    def take(self) -> Iterator[StreamEvent]:
        """The events to send of everything queued; stops at the end of the stream (``ended``)."""
        items = self.items
        while items:
            event = items.popleft()
            if isinstance(event, TextDelta):
                if not self.pending and self.loop.time() - self.sent_at >= self._hold():
                    self.sent_at = self.loop.time()
                    yield event
                else:
                    self.pending.append(event.text)
                continue
            if self.pending:
                yield self._flush()
            if isinstance(event, _End):
                self.ended = event
                return
            yield event
        if self.pending and self.loop.time() - self.sent_at >= self._hold():
            yield self._flush()

    async def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if not self.reader.done():
            self.reader.cancel()
            with contextlib.suppress(BaseException):
                await self.reader
        aclose = getattr(self.events, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()

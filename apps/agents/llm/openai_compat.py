"""The OpenAI-compatible provider: OpenAI, Ollama, vLLM, llama.cpp server, LM Studio over ``httpx``.

Streaming uses ``/chat/completions`` with ``stream: true`` and ``stream_options.include_usage``;
tool-call arguments arrive in pieces keyed by ``index`` and are assembled before one ``ToolCall``
per call is yielded. 429 and 5xx answers (and connection failures) are retried with exponential
backoff that honours ``Retry-After``, but only before the first event was yielded: a stream that
already produced text is never replayed. Every failure ends the stream with one ``ErrorEvent``.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from apps.agents.llm.base import (
    ChatMessage,
    Done,
    ErrorEvent,
    GenerationConfig,
    JsonConstraint,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCalling,
    ToolSpec,
    Usage,
)

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class _Failure(Exception):
    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_to_datetime(value) if value else None
    if parsed is None:
        return None
    return max(0.0, parsed.timestamp() - time.time())


def to_openai_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.role == "assistant" and m.tool_calls:
            item["tool_calls"] = [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": json.dumps(tc.arguments)},
                }
                for tc in m.tool_calls
            ]
            item["content"] = m.content or None
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id or ""
            if m.name:
                item["name"] = m.name
        out.append(item)
    return out


def to_openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def _parse_arguments(name: str, raw: str) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _Failure(f"malformed tool-call arguments for {name!r}: {exc.msg} in {raw[:200]!r}") from None
    except RecursionError:  # nested deeper than Python's parser goes
        raise _Failure(f"malformed tool-call arguments for {name!r}: nested too deeply") from None
    if not isinstance(parsed, dict):
        raise _Failure(f"tool-call arguments for {name!r} are not a JSON object: {raw[:200]!r}")
    return parsed


def _usage(data: dict[str, Any] | None) -> Usage | None:
    if not isinstance(data, dict):
        return None
    return Usage(
        input_tokens=int(data.get("prompt_tokens") or 0),
        output_tokens=int(data.get("completion_tokens") or 0),
    )


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


class _StreamReading:
    """What an OpenAI-compatible stream said so far: its tool calls in pieces, its usage, how it ended."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pending: dict[int, _PendingCall] = {}
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.saw_done = False

    def chunk_of(self, line: str) -> dict[str, Any] | None:
        """The JSON chunk of an SSE line; None for a comment, a blank line or ``[DONE]`` (``saw_done``)."""
        line = line.strip()
        if not line or line.startswith(":") or not line.startswith("data:"):
            return None
        payload = line[5:].strip()
        if payload == "[DONE]":
            self.saw_done = True
            return None
        try:
            chunk = json.loads(payload)
        except (json.JSONDecodeError, RecursionError):
            raise _Failure(f"malformed stream chunk from {self.url}: {payload[:200]!r}") from None
        if not isinstance(chunk, dict):
            raise _Failure(f"malformed stream chunk from {self.url}: {payload[:200]!r}")
        if chunk.get("error"):
            err = chunk["error"]
            message = err.get("message") if isinstance(err, dict) else str(err)
            raise _Failure(f"the model server reported an error: {message}")
        return chunk

    def read(self, chunk: dict[str, Any]) -> list[str]:
        """Take in a chunk: its text deltas are returned, its tool call pieces and finish kept."""
        self.usage = _usage(chunk.get("usage")) or self.usage
        texts = []
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                texts.append(str(delta["content"]))
            for tc in delta.get("tool_calls") or []:
                self._call_piece(tc)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        return texts

    def _call_piece(self, tc: dict[str, Any]) -> None:
        call = self.pending.setdefault(int(tc.get("index", len(self.pending))), _PendingCall())
        if tc.get("id"):
            call.id = str(tc["id"])
        fn = tc.get("function") or {}
        if fn.get("name"):
            call.name += str(fn["name"])
        if fn.get("arguments"):
            call.arguments += str(fn["arguments"])

    def ending(self) -> list[StreamEvent]:
        """The stream's tool calls, whole, and ``Done``; ``_Failure`` for a stream cut short."""
        if not self.saw_done and self.finish_reason is None:
            raise _Failure(f"the stream of {self.url} ended before it finished (no finish_reason, no [DONE])")
        events: list[StreamEvent] = []
        for index in sorted(self.pending):
            call = self.pending[index]
            if not call.name:
                raise _Failure(f"malformed stream from {self.url}: tool call #{index} has no name")
            events.append(
                ToolCall(
                    id=call.id or f"call_{call.name}",
                    name=call.name,
                    arguments=_parse_arguments(call.name, call.arguments),
                )
            )
        events.append(Done(usage=self.usage or Usage(), finish_reason=self.finish_reason or "stop"))
        return events


@dataclass
class OpenAICompatProvider:
    """Talk to ``{base_url}/chat/completions``. ``name`` is what the ``meta`` frame reports."""

    base_url: str
    model: str
    api_key: str = ""
    name: str = ""
    timeout: float = 120.0
    connect_timeout: float = 10.0
    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 20.0
    extra_headers: dict[str, str] = field(default_factory=dict)
    # Added to the error when the server cannot be reached (how to start it).
    unreachable_hint: str = ""
    # Whether the model's own tool calls are relied on, and how the server takes a JSON Schema.
    tool_calling: ToolCalling = "native"
    json_constraint: JsonConstraint = "response_format"

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        if not self.name:
            self.name = self.model

    def stream(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        *,
        extra_body: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Stream one completion; ``extra_body`` adds request fields (``response_format``, …)."""
        return self._run(messages, tools, config, extra_body or {})

    def _body(
        self, messages: list[ChatMessage], tools: list[ToolSpec], config: GenerationConfig
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": to_openai_messages(messages)}
        if tools:
            body["tools"] = to_openai_tools(tools)
        if config.temperature is not None:
            body["temperature"] = config.temperature
        if config.max_output_tokens is not None:
            body["max_tokens"] = config.max_output_tokens
        if config.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **self.extra_headers}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    async def _run(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        extra_body: dict[str, Any],
    ) -> AsyncIterator[StreamEvent]:
        body = {**self._body(messages, tools, config), **extra_body}
        url = f"{self.base_url}/chat/completions"
        timeout = httpx.Timeout(self.timeout, connect=self.connect_timeout)
        attempt = 0
        async with httpx.AsyncClient(timeout=timeout, headers=self._headers()) as client:
            while True:
                yielded = False
                try:
                    if config.stream:
                        async for event in self._stream_once(client, url, body):
                            yielded = True
                            yield event
                    else:
                        for event in await self._complete_once(client, url, body):
                            yielded = True
                            yield event
                    return
                except _Failure as failure:
                    retryable = failure.status in RETRY_STATUSES or failure.status == 0
                    if yielded or not retryable or attempt >= self.max_retries:
                        status = failure.status or None
                        yield ErrorEvent(error=failure.message, status=status)
                        return
                    delay = failure.retry_after
                    if delay is None:
                        delay = self.backoff * (2**attempt)
                    delay = min(delay, self.max_backoff)
                    attempt += 1
                    logger.warning("%s; retry %d in %.2fs", failure.message, attempt, delay)
                    await asyncio.sleep(delay)

    async def _send(self, client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
        try:
            return await client.send(client.build_request("POST", url, json=body), stream=True)
        except httpx.TimeoutException:
            raise _Failure(f"timed out connecting to {url}", status=0) from None
        except httpx.HTTPError as exc:
            hint = f" ({self.unreachable_hint})" if self.unreachable_hint else ""
            raise _Failure(f"cannot reach {url}: {exc}{hint}", status=0) from None

    async def _check(self, response: httpx.Response, url: str) -> None:
        if response.status_code < 400:
            return
        raw = (await response.aread()).decode("utf-8", "replace")
        await response.aclose()
        detail = raw[:300]
        try:
            err = json.loads(raw).get("error")
            if isinstance(err, dict) and err.get("message"):
                detail = str(err["message"])
            elif isinstance(err, str):
                detail = err
        except (ValueError, AttributeError):
            pass
        raise _Failure(
            f"HTTP {response.status_code} from {url}: {detail}",
            status=response.status_code,
            retry_after=_retry_after(response.headers.get("retry-after")),
        )

    async def _complete_once(
        self, client: httpx.AsyncClient, url: str, body: dict[str, Any]
    ) -> list[StreamEvent]:
        response = await self._send(client, url, body)
        await self._check(response, url)
        try:
            raw = await response.aread()
        except httpx.HTTPError as exc:
            raise _Failure(f"reading the answer of {url} failed: {exc}") from None
        finally:
            await response.aclose()
        try:
            data = json.loads(raw)
            choice = data["choices"][0]
            message = choice.get("message") or {}
        except (ValueError, KeyError, IndexError, TypeError, RecursionError):
            raise _Failure(f"malformed answer from {url}: {raw[:200]!r}") from None
        events: list[StreamEvent] = []
        if message.get("content"):
            events.append(TextDelta(text=str(message["content"])))
        for i, tc in enumerate(message.get("tool_calls") or []):
            fn = tc.get("function") or {}
            name = str(fn.get("name") or "")
            args = fn.get("arguments")
            parsed = args if isinstance(args, dict) else _parse_arguments(name, str(args or ""))
            events.append(ToolCall(id=str(tc.get("id") or f"call_{name or i}"), name=name, arguments=parsed))
        events.append(
            Done(
                usage=_usage(data.get("usage")) or Usage(),
                finish_reason=str(choice.get("finish_reason") or "stop"),
            )
        )
        return events

    async def _stream_once(
        self, client: httpx.AsyncClient, url: str, body: dict[str, Any]
    ) -> AsyncIterator[StreamEvent]:
        response = await self._send(client, url, body)
        await self._check(response, url)
        reading = _StreamReading(url)
        try:
            async for line in response.aiter_lines():
                chunk = reading.chunk_of(line)
                if chunk is None:
                    if reading.saw_done:
                        break
                    continue
                for text in reading.read(chunk):
                    yield TextDelta(text=text)
        except httpx.TimeoutException:
            raise _Failure(f"timed out reading the stream of {url}") from None
        except httpx.HTTPError as exc:
            raise _Failure(f"the stream of {url} broke off: {exc}") from None
        finally:
            await response.aclose()
        for event in reading.ending():
            yield event

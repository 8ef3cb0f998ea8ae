"""The OpenAI-compatible provider against a real local HTTP server; scripted provider; resolve_model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from pytest_django import Settings

from apps.agents.llm import openai_compat
from apps.agents.llm.base import (
    ChatMessage,
    Done,
    ErrorEvent,
    GenerationConfig,
    ModelUnavailable,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    ToolSpec,
    Usage,
)
from apps.agents.llm.openai_compat import OpenAICompatProvider
from apps.agents.llm.resolve import resolve_model
from apps.agents.llm.scripted import (
    Delay,
    Pace,
    ScriptedProvider,
    register_script,
    text,
    tool_call,
    unregister_script,
)
from tests.llm_server import Json, LLMTestServer, Status, Stream, completion, text_chunks, tool_call_chunks

MESSAGES = [ChatMessage(role="system", content="be brief"), ChatMessage(role="user", content="hi")]
TOOLS = [ToolSpec(name="search", description="Search.", parameters={"type": "object", "properties": {}})]


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as s:
        yield s


def provider_for(server: LLMTestServer, **kwargs: object) -> OpenAICompatProvider:
    return OpenAICompatProvider(
        base_url=server.base_url, model="test-model", api_key="k", backoff=0.01, **kwargs
    )  # type: ignore[arg-type]


async def collect(
    provider: OpenAICompatProvider | ScriptedProvider, stream: bool = True
) -> list[StreamEvent]:
    config = GenerationConfig(model="test-model", temperature=0.2, stream=stream)
    return [e async for e in provider.stream(MESSAGES, TOOLS, config)]


async def test_openai_stream_text_usage_and_done(server: LLMTestServer) -> None:
    server.enqueue(
        Stream(text_chunks("Hello ", "world"), usage={"prompt_tokens": 12, "completion_tokens": 2})
    )

    events = await collect(provider_for(server))

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hello ", "world"]
    assert events[-1] == Done(usage=Usage(input_tokens=12, output_tokens=2), finish_reason="stop")
    request = server.requests[0]
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert request["temperature"] == 0.2
    assert request["tools"][0]["function"]["name"] == "search"
    assert server.headers[0]["Authorization"] == "Bearer k"


async def test_openai_stream_assembles_split_tool_call_arguments(server: LLMTestServer) -> None:
    chunks = tool_call_chunks("search", {"query": "acme corp", "limit": 5}, call_id="call_a", pieces=4)
    chunks += tool_call_chunks("search", {"query": "beta"}, call_id="call_b", index=1, pieces=2)
    server.enqueue(
        Stream(chunks, usage={"prompt_tokens": 5, "completion_tokens": 9}, finish_reason="tool_calls")
    )

    events = await collect(provider_for(server))

    assert [e for e in events if isinstance(e, ToolCall)] == [
        ToolCall(id="call_a", name="search", arguments={"query": "acme corp", "limit": 5}),
        ToolCall(id="call_b", name="search", arguments={"query": "beta"}),
    ]
    assert isinstance(events[-1], Done)
    assert events[-1].finish_reason == "tool_calls"


async def test_openai_sends_tool_history_in_openai_format(server: LLMTestServer) -> None:
    server.enqueue(Stream(text_chunks("ok")))
    messages = [
        *MESSAGES,
        ChatMessage(
            role="assistant", tool_calls=[ToolCallRequest(id="c1", name="search", arguments={"q": 1})]
        ),
        ChatMessage(role="tool", content='{"hits": []}', tool_call_id="c1", name="search"),
    ]

    _ = [e async for e in provider_for(server).stream(messages, [], GenerationConfig(model="m"))]

    sent = server.requests[0]["messages"]
    assert sent[2]["tool_calls"][0] == {
        "id": "c1",
        "type": "function",
        "function": {"name": "search", "arguments": '{"q": 1}'},
    }
    assert sent[3] == {"role": "tool", "content": '{"hits": []}', "tool_call_id": "c1", "name": "search"}
    assert "tools" not in server.requests[0]


async def test_openai_http_500_is_retried_then_reported(server: LLMTestServer) -> None:
    server.enqueue(*[Status(500, {"error": {"message": "boom"}}) for _ in range(3)])

    events = await collect(provider_for(server, max_retries=2))

    assert len(server.requests) == 3
    assert len(events) == 1
    assert isinstance(events[0], ErrorEvent)
    assert events[0].status == 500
    assert "HTTP 500" in events[0].error and "boom" in events[0].error


async def test_openai_http_400_is_not_retried(server: LLMTestServer) -> None:
    server.enqueue(Status(400, {"error": {"message": "bad model"}}))

    events = await collect(provider_for(server))

    assert len(server.requests) == 1
    assert isinstance(events[0], ErrorEvent) and "bad model" in events[0].error


async def test_openai_429_then_success_honours_retry_after(
    server: LLMTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.enqueue(
        Status(429, {"error": "slow down"}, headers={"Retry-After": "0.3"}), Stream(text_chunks("ok"))
    )

    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded_sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(openai_compat, "asyncio", SimpleNamespace(sleep=recorded_sleep))

    events = await collect(provider_for(server))

    assert len(server.requests) == 2
    assert waits == [0.3]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ok"]
    assert isinstance(events[-1], Done)


async def test_openai_truncated_stream_is_an_error(server: LLMTestServer) -> None:
    server.enqueue(Stream(text_chunks("Hel"), truncate=True))

    events = await collect(provider_for(server))

    assert isinstance(events[0], TextDelta)
    assert isinstance(events[-1], ErrorEvent)
    assert "ended before it finished" in events[-1].error
    assert len(server.requests) == 1  # text was already streamed: never replayed


async def test_openai_malformed_tool_call_json_is_an_error(server: LLMTestServer) -> None:
    server.enqueue(Stream(tool_call_chunks("search", '{"query": "ac'), finish_reason="tool_calls"))

    events = await collect(provider_for(server))

    assert len(events) == 1
    assert isinstance(events[0], ErrorEvent)
    assert "malformed tool-call arguments for 'search'" in events[0].error


async def test_openai_malformed_chunk_is_an_error(server: LLMTestServer) -> None:
    server.enqueue(Stream(["{not json"]))

    events = await collect(provider_for(server))

    assert isinstance(events[-1], ErrorEvent) and "malformed stream chunk" in events[-1].error


async def test_openai_non_streaming_answer(server: LLMTestServer) -> None:
    call = {"id": "call_9", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
    server.enqueue(Json(completion("thinking", [call])))

    events = await collect(provider_for(server), stream=False)

    assert events == [
        TextDelta(text="thinking"),
        ToolCall(id="call_9", name="search", arguments={"q": "x"}),
        Done(usage=Usage(input_tokens=11, output_tokens=7), finish_reason="tool_calls"),
    ]
    assert "stream" not in server.requests[0]


async def test_openai_unreachable_server_is_an_error() -> None:
    provider = OpenAICompatProvider(base_url="http://127.0.0.1:9/v1", model="m", max_retries=1, backoff=0.01)

    events = await collect(provider)

    assert isinstance(events[-1], ErrorEvent) and "cannot reach" in events[-1].error


async def test_openai_timeout_is_an_error(server: LLMTestServer) -> None:
    server.enqueue(Stream(text_chunks("a", "b"), delay=1.0))

    events = await collect(provider_for(server, timeout=0.2))

    assert isinstance(events[-1], ErrorEvent) and "timed out" in events[-1].error


async def test_scripted_provider_replays_turns_with_delays_and_records_calls() -> None:
    provider = ScriptedProvider(
        turns=[[tool_call("search", {"q": 1}, id="c1")], [Delay(0.01), *text("a", "b")]]
    )

    first = await collect(provider)
    second = await collect(provider)
    third = await collect(provider)

    assert first[0] == ToolCall(id="c1", name="search", arguments={"q": 1})
    assert isinstance(first[-1], Done)
    assert [e.text for e in second if isinstance(e, TextDelta)] == ["a", "b"]
    assert isinstance(third[0], ErrorEvent)
    assert len(provider.calls) == 3 and provider.calls[0].tools[0].name == "search"


class FakeClock:
    """A clock that moves only when the provider sleeps (by ``late`` more than asked)."""

    def __init__(self, late: float = 0.0) -> None:
        self.now = 100.0
        self.late = late
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds + self.late


async def test_paced_scripted_provider_waits_first_token_delay_then_one_gap_per_token() -> None:
    clock = FakeClock()
    provider = ScriptedProvider(
        turns=[[tool_call("search", id="c1")], text("a", "b", "c")],
        pace=Pace(first_token_seconds=0.5, tokens_per_second=50),
        clock=clock,
        sleep=clock.sleep,
    )

    first = await collect(provider)
    second = await collect(provider)

    assert first[0] == ToolCall(id="c1", name="search", arguments={})
    assert [e.text for e in second if isinstance(e, TextDelta)] == ["a", "b", "c"]
    assert clock.sleeps == [0.5, 0.5, 0.02, 0.02]


async def test_paced_scripted_provider_makes_up_a_late_wake_up_instead_of_adding_it() -> None:
    clock = FakeClock(late=0.015)
    provider = ScriptedProvider(
        turns=[text("a", "b", "c", "d")],
        pace=Pace(first_token_seconds=0.5, tokens_per_second=50),
        clock=clock,
        sleep=clock.sleep,
    )

    events = await collect(provider)

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["a", "b", "c", "d"]
    assert clock.sleeps == [0.5, 0.005, 0.005, 0.005]


def test_resolve_model_kgchat_model_overrides_every_name(settings: Settings) -> None:
    settings.KGCHAT_MODEL = "ollama/llama3.2"
    settings.OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"

    provider = resolve_model("gemini-2.0-flash")

    assert isinstance(provider, OpenAICompatProvider)
    assert provider.name == "ollama/llama3.2"
    assert provider.model == "llama3.2"


def test_resolve_model_openai_uses_settings(settings: Settings) -> None:
    settings.KGCHAT_MODEL = ""
    settings.OPENAI_BASE_URL = "http://llm.internal/v1"
    settings.OPENAI_API_KEY = "sk-test"

    provider = resolve_model("openai/gpt-4o-mini")

    assert isinstance(provider, OpenAICompatProvider)
    assert (provider.base_url, provider.api_key, provider.model, provider.name) == (
        "http://llm.internal/v1",
        "sk-test",
        "gpt-4o-mini",
        "openai/gpt-4o-mini",
    )


def test_resolve_model_gemini_without_key_is_a_clear_error(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.KGCHAT_MODEL = ""
    settings.GOOGLE_API_KEY = ""
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)

    with pytest.raises(ModelUnavailable, match="GOOGLE_API_KEY"):
        resolve_model("gemini-2.0-flash")


def test_resolve_model_unknown_names_are_refused(settings: Settings) -> None:
    settings.KGCHAT_MODEL = ""
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_API_KEY = ""

    with pytest.raises(ModelUnavailable, match="unknown model name"):
        resolve_model("gpt-4")
    with pytest.raises(ModelUnavailable, match="OPENAI_BASE_URL"):
        resolve_model("openai/gpt-4o")
    with pytest.raises(ModelUnavailable, match="no scripted model"):
        resolve_model("scripted/nope")


def test_resolve_model_scripted_by_name(settings: Settings) -> None:
    settings.KGCHAT_MODEL = ""
    script = ScriptedProvider(turns=[text("hi")])
    register_script("greeting", script)
    try:
        provider = resolve_model("scripted/greeting")
    finally:
        unregister_script("greeting")

    assert provider is script
    assert provider.name == "scripted/greeting"


DEEP = "[" * 10_000 + "]" * 10_000


async def test_openai_tool_call_arguments_nested_10000_deep_are_an_error_not_a_crash(
    server: LLMTestServer,
) -> None:
    server.enqueue(Stream(tool_call_chunks("search", '{"query": ' + DEEP + "}"), finish_reason="tool_calls"))

    events = await collect(provider_for(server))

    assert len(events) == 1
    assert isinstance(events[0], ErrorEvent)
    assert "malformed tool-call arguments for 'search'" in events[0].error


async def test_openai_stream_chunk_nested_10000_deep_is_an_error_not_a_crash(server: LLMTestServer) -> None:
    server.enqueue(Stream([DEEP]))

    events = await collect(provider_for(server))

    assert isinstance(events[-1], ErrorEvent) and "malformed stream chunk" in events[-1].error

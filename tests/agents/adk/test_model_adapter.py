"""ModelAdapter: stream/non-stream semantics, SystemInstruction forwarding, convertMessages."""

from __future__ import annotations

import asyncio

from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from apps.agents.adk.model_adapter import ModelAdapter, convert_messages
from apps.agents.llm.base import ChatMessage, Done, ErrorEvent, TextDelta, ToolCall, Usage
from apps.agents.llm.scripted import Delay, Raise, ScriptedProvider


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def generate(provider: ScriptedProvider, request: LlmRequest, *, stream: bool) -> list[LlmResponse]:
    adapter = ModelAdapter.for_provider(provider)
    return [r async for r in adapter.generate_content_async(request, stream=stream)]


def hello_world() -> ScriptedProvider:
    return ScriptedProvider(turns=[[TextDelta(text="Hello "), TextDelta(text="world"), Done()]])


async def test_non_streaming_mode_accumulates_complete_response() -> None:
    responses = await generate(hello_world(), LlmRequest(contents=[user("hi")]), stream=False)

    assert len(responses) == 1
    final = responses[0]
    assert final.partial is False and final.turn_complete is True
    assert final.content is not None and final.content.parts is not None
    assert final.content.parts[0].text == "Hello world"


async def test_non_streaming_mode_accumulates_tool_calls() -> None:
    provider = ScriptedProvider(turns=[[ToolCall(id="adk-1", name="search", arguments={"q": "x"}), Done()]])

    responses = await generate(provider, LlmRequest(contents=[user("hi")]), stream=False)

    assert len(responses) == 1
    final = responses[0]
    assert final.partial is False and final.turn_complete is True
    calls = final.get_function_calls()
    assert [(c.id, c.name, c.args) for c in calls] == [("adk-1", "search", {"q": "x"})]


async def test_streaming_mode_yields_partial_events_and_complete_final() -> None:
    responses = await generate(hello_world(), LlmRequest(contents=[user("hi")]), stream=True)

    assert [(r.partial, r.content.parts[0].text) for r in responses[:2]] == [
        (True, "Hello "),
        (True, "world"),
    ]  # type: ignore[union-attr,index]
    assert len(responses) == 3
    final = responses[2]
    assert final.partial is False and final.turn_complete is True
    assert final.content.parts[0].text == "Hello world"  # type: ignore[union-attr,index]


async def test_streaming_mode_reports_usage_metadata() -> None:
    provider = ScriptedProvider(
        turns=[[TextDelta(text="x"), Done(usage=Usage(input_tokens=7, output_tokens=3))]]
    )

    responses = await generate(provider, LlmRequest(contents=[user("hi")]), stream=True)

    usage = responses[-1].usage_metadata
    assert usage is not None
    assert (usage.prompt_token_count, usage.candidates_token_count) == (7, 3)


async def test_provider_error_propagates_correctly() -> None:
    for stream in (False, True):
        provider = ScriptedProvider(
            turns=[[TextDelta(text="par"), ErrorEvent(error="upstream died"), TextDelta(text="never")]]
        )

        responses = await generate(provider, LlmRequest(contents=[user("hi")]), stream=stream)

        assert responses[-1].error_code == "llm_error"
        assert responses[-1].error_message == "upstream died"
        assert all(r.error_code is None for r in responses[:-1])
        assert len(responses) == (2 if stream else 1)


async def test_provider_exception_is_yielded_as_error() -> None:
    provider = ScriptedProvider(turns=[[Raise("connection refused")]])

    responses = await generate(provider, LlmRequest(contents=[user("hi")]), stream=True)

    assert [(r.error_code, r.error_message) for r in responses] == [("llm_error", "connection refused")]


async def test_systeminstruction_present_in_request() -> None:
    provider = hello_world()
    request = LlmRequest(
        contents=[user("hi")], config=types.GenerateContentConfig(system_instruction="You are kind.")
    )

    await generate(provider, request, stream=False)

    sent = provider.calls[0].messages
    assert sent[0] == ChatMessage(role="system", content="You are kind.")
    assert sent[1] == ChatMessage(role="user", content="hi")


async def test_systeminstruction_absent() -> None:
    provider = hello_world()

    await generate(provider, LlmRequest(contents=[user("hi")]), stream=False)

    assert provider.calls[0].messages == [ChatMessage(role="user", content="hi")]


async def test_multi_part_systeminstruction() -> None:
    provider = hello_world()
    instruction = types.Content(
        role="system", parts=[types.Part(text="Part one."), types.Part(text="Part two.")]
    )
    request = LlmRequest(
        contents=[user("hi")], config=types.GenerateContentConfig(system_instruction=instruction)
    )

    await generate(provider, request, stream=False)

    systems = [m for m in provider.calls[0].messages if m.role == "system"]
    assert systems == [ChatMessage(role="system", content="Part one.\nPart two.")]


async def test_tools_from_function_declarations_become_tool_specs() -> None:
    provider = hello_world()
    decl = types.FunctionDeclaration(
        name="search",
        description="Search.",
        parameters_json_schema={"type": "object", "properties": {"q": {"type": "string"}}},
    )
    legacy = types.FunctionDeclaration(
        name="old",
        description="Old.",
        parameters=types.Schema(
            type=types.Type.OBJECT, properties={"n": types.Schema(type=types.Type.INTEGER)}
        ),
    )
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[decl, legacy])], temperature=0.3
    )

    await generate(provider, LlmRequest(contents=[user("hi")], config=config), stream=False)

    tools = provider.calls[0].tools
    assert tools[0].parameters == {"type": "object", "properties": {"q": {"type": "string"}}}
    assert tools[1].parameters == {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert provider.calls[0].config.temperature == 0.3


def test_functioncall_with_original_id_in_convertmessages() -> None:
    contents = [
        user("list files"),
        types.Content(
            role="model",
            parts=[
                types.Part(
                    function_call=types.FunctionCall(id="adk-uuid-123", name="exec", args={"cmd": "ls"})
                )
            ],
        ),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="adk-uuid-123", name="exec", response={"output": "a.txt"}
                    )
                )
            ],
        ),
    ]

    messages = convert_messages(contents)

    assert messages[1].tool_calls[0].id == "adk-uuid-123"
    assert messages[2].role == "tool" and messages[2].tool_call_id == "adk-uuid-123"
    assert messages[2].content == '{"output": "a.txt"}'


def test_functioncall_without_id_in_convertmessages_falls_back_to_call_name() -> None:
    contents = [
        types.Content(
            role="model", parts=[types.Part(function_call=types.FunctionCall(name="search", args={}))]
        )
    ]

    messages = convert_messages(contents)

    assert messages[0].tool_calls[0].id == "call_search"


# --- merging text deltas (coalesce_seconds) -------------------------------------------------------


async def stream_with_window(provider: ScriptedProvider, window: float) -> list[LlmResponse]:
    adapter = ModelAdapter.for_provider(provider, coalesce_seconds=window)
    request = LlmRequest(contents=[user("hi")])
    return [r async for r in adapter.generate_content_async(request, stream=True)]


def partial_texts(responses: list[LlmResponse]) -> list[str]:
    return [r.content.parts[0].text or "" for r in responses if r.partial]  # type: ignore[union-attr,index]


async def test_instant_deltas_are_merged_after_the_first_and_the_text_is_unchanged() -> None:
    words = [f"w{i} " for i in range(200)]
    provider = ScriptedProvider(turns=[[*(TextDelta(text=w) for w in words), Done()]])

    responses = await stream_with_window(provider, 0.5)

    assert partial_texts(responses) == ["w0 ", "".join(words[1:])]
    assert responses[-1].content.parts[0].text == "".join(words)  # type: ignore[union-attr,index]


async def test_deltas_further_apart_than_the_window_stream_one_by_one() -> None:
    provider = ScriptedProvider(
        turns=[
            [TextDelta(text="a"), Delay(0.05), TextDelta(text="b"), Delay(0.05), TextDelta(text="c"), Done()]
        ]
    )

    responses = await stream_with_window(provider, 0.01)

    assert partial_texts(responses) == ["a", "b", "c"]


async def test_merged_text_is_sent_when_the_window_ends_even_if_the_model_stalls() -> None:
    provider = ScriptedProvider(
        turns=[
            [
                TextDelta(text="a"),
                TextDelta(text="b"),
                TextDelta(text="c"),
                Delay(1.0),
                TextDelta(text="d"),
                Done(),
            ]
        ]
    )
    loop = asyncio.get_running_loop()
    adapter = ModelAdapter.for_provider(provider, coalesce_seconds=0.05)
    started = loop.time()
    arrivals: list[tuple[str, float]] = []

    async for response in adapter.generate_content_async(LlmRequest(contents=[user("hi")]), stream=True):
        if response.partial:
            arrivals.append((response.content.parts[0].text or "", loop.time() - started))  # type: ignore[union-attr,index]

    assert [t for t, _ in arrivals] == ["a", "bc", "d"]
    # "bc" did not wait for the stalled model's "d" (measured against "d", not the clock: on a busy
    # machine the window's end itself may come late; a 0.2 s bound failed once at 0.25 s)
    assert arrivals[2][1] - arrivals[1][1] > 0.5


async def test_a_tool_call_after_merged_text_keeps_its_order() -> None:
    provider = ScriptedProvider(
        turns=[[TextDelta(text="Let me "), TextDelta(text="look."), ToolCall(id="c1", name="search"), Done()]]
    )

    responses = await stream_with_window(provider, 0.5)

    assert partial_texts(responses) == ["Let me ", "look."]
    final = responses[-1]
    assert final.content.parts[0].text == "Let me look."  # type: ignore[union-attr,index]
    assert [c.name for c in final.get_function_calls()] == ["search"]


# --- streaming past ADK (text_sink) ----------------------------------------------------------------


async def test_with_a_text_sink_deltas_go_to_the_sink_in_order_before_the_one_final_response() -> None:
    provider = ScriptedProvider(
        turns=[[TextDelta(text="Paris "), TextDelta(text="is "), ToolCall(id="c1", name="search"), Done()]]
    )
    received: list[str] = []
    yielded: list[LlmResponse] = []

    async def sink(text: str) -> None:
        assert not yielded  # the text reaches the sink before ADK sees any response
        received.append(text)

    adapter = ModelAdapter.for_provider(provider, text_sink=sink)
    async for response in adapter.generate_content_async(LlmRequest(contents=[user("hi")]), stream=True):
        yielded.append(response)

    assert received == ["Paris ", "is "]
    assert len(yielded) == 1 and not yielded[0].partial
    parts = yielded[0].content.parts  # type: ignore[union-attr]
    assert parts[0].text == "Paris is "  # type: ignore[index]
    assert parts[1].function_call.name == "search"  # type: ignore[index,union-attr]


async def test_with_a_text_sink_merged_deltas_reach_it_as_the_same_text() -> None:
    words = [f"w{i} " for i in range(200)]
    provider = ScriptedProvider(turns=[[*(TextDelta(text=w) for w in words), Done()]])
    received: list[str] = []

    async def sink(text: str) -> None:
        received.append(text)

    adapter = ModelAdapter.for_provider(provider, coalesce_seconds=0.5, text_sink=sink)
    responses = [
        r async for r in adapter.generate_content_async(LlmRequest(contents=[user("hi")]), stream=True)
    ]

    assert received == ["w0 ", "".join(words[1:])]
    assert [r.partial for r in responses] == [False]
    assert responses[0].content.parts[0].text == "".join(words)  # type: ignore[union-attr,index]


async def test_text_after_a_tool_call_follows_it_and_is_merged_again() -> None:
    provider = ScriptedProvider(
        turns=[
            [
                TextDelta(text="a"),
                TextDelta(text="b"),
                ToolCall(id="c1", name="search"),
                TextDelta(text="c"),
                TextDelta(text="d"),
                Done(),
            ]
        ]
    )

    responses = await stream_with_window(provider, 0.05)

    assert partial_texts(responses) == ["a", "b", "cd"]


# --- merging driven by the event loop's lag ---------------------------------------------------------


async def merged(provider: ScriptedProvider, window: float, lag: float, max_hold: float) -> list[str]:
    from apps.agents.adk.model_adapter import coalesce_text

    config = None
    stream = coalesce_text(provider.stream([], [], config), window, lag=lambda: lag, max_hold=max_hold)  # type: ignore[arg-type]
    return [e.text async for e in stream if isinstance(e, TextDelta)]


def spaced(*chunks: str, gap: float = 0.05) -> ScriptedProvider:
    items: list[object] = []
    for chunk in chunks:
        items += [TextDelta(text=chunk), Delay(gap)]
    return ScriptedProvider(turns=[[*items[:-1], Done()]])  # type: ignore[list-item]


async def test_when_the_loop_is_behind_deltas_further_apart_than_the_window_are_merged() -> None:
    provider = spaced("a", "b", "c", "d")

    texts = await merged(provider, window=0.01, lag=10.0, max_hold=60.0)

    assert texts == ["a", "bcd"]  # the first at once, the rest held for the lag, then flushed by Done


async def test_when_the_loop_is_idle_deltas_further_apart_than_the_window_go_one_by_one() -> None:
    provider = spaced("a", "b", "c")

    texts = await merged(provider, window=0.01, lag=0.0, max_hold=60.0)

    assert texts == ["a", "b", "c"]


async def test_a_lagging_loop_merges_text_but_never_across_a_tool_call() -> None:
    provider = ScriptedProvider(
        turns=[
            [
                TextDelta(text="a"),
                Delay(0.02),
                TextDelta(text="b"),
                ToolCall(id="c1", name="search"),
                Delay(0.02),
                TextDelta(text="c"),
                Delay(0.02),
                TextDelta(text="d"),
                Done(),
            ]
        ]
    )
    from apps.agents.adk.model_adapter import coalesce_text

    stream = coalesce_text(provider.stream([], [], None), 0.01, lag=lambda: 10.0, max_hold=60.0)  # type: ignore[arg-type]
    events = [e async for e in stream]

    assert [e.text if isinstance(e, TextDelta) else e.name for e in events if not isinstance(e, Done)] == [  # type: ignore[union-attr]
        "a",
        "b",
        "search",
        "cd",
    ]

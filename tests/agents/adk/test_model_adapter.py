"""ModelAdapter: stream/non-stream semantics, SystemInstruction forwarding, convertMessages."""

from __future__ import annotations

from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from apps.agents.adk.model_adapter import ModelAdapter, convert_messages
from apps.agents.llm.base import ChatMessage, Done, ErrorEvent, TextDelta, ToolCall, Usage
from apps.agents.llm.scripted import Raise, ScriptedProvider


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

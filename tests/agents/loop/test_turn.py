"""The small-model agent loop: step schema, call scanner, hold-back streaming, result layout, steps.

The steps run against the local OpenAI-compatible test server (tests/llm_server.py), so the
requests the loop sends (``response_format``, ``cache_prompt``, the prompt) are checked as sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from apps.agents.llm.base import (
    ChatMessage,
    Done,
    GenerationConfig,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    ToolSpec,
)
from apps.agents.llm.openai_compat import OpenAICompatProvider
from apps.agents.loop.holdback import LOOP_REPEATS, CallHoldback, find_call, looping
from apps.agents.loop.layout import layout_result
from apps.agents.loop.prompt import prompt_messages
from apps.agents.loop.schema import step_schema
from apps.agents.loop.turn import SmallModelTurn
from apps.graph_tools.registry import tool_get
from tests.llm_server import Json, LLMTestServer, Stream, completion, text_chunks

TOOL_NAMES = ["hybrid_search", "get_entity_edges", "traverse_graph", "list_entity_types"]
PORTUGAL = {
    "id": "3f72649e-0e2c-4664-b509-a91c9a01b279",
    "key": "country:PT",
    "type": "Country",
    "name": "Portugal",
    "description": "Its capital is Lisbon.",
    "score": 0.03,
}


def spec(name: str) -> ToolSpec:
    tool = tool_get(name)
    return ToolSpec(
        name=tool.name, description=tool.description, parameters=tool.args_model.model_json_schema()
    )


TOOLS = [spec(name) for name in TOOL_NAMES]


# --- the step schema ---


def test_step_schema_accepts_a_call_of_each_offered_tool_with_its_own_arguments() -> None:
    schema = step_schema(TOOLS)

    jsonschema.validate({"name": "hybrid_search", "arguments": {"query": "Portugal"}}, schema)
    jsonschema.validate({"name": "traverse_graph", "arguments": {"start_entity_id": "country:PT"}}, schema)
    jsonschema.validate({"name": "list_entity_types", "arguments": {}}, schema)
    assert [branch["properties"]["name"] for branch in schema["oneOf"]] == [{"const": n} for n in TOOL_NAMES]
    assert "$ref" not in json.dumps(schema) and "$defs" not in json.dumps(schema)


@pytest.mark.parametrize(
    "call",
    [
        {"name": "delete_everything", "arguments": {}},
        {"name": "hybrid_search", "arguments": {}},
        {"name": "hybrid_search", "arguments": {"query": "x", "invented": 1}},
        {"name": "traverse_graph", "arguments": {"start_entity_id": "x", "direction": "sideways"}},
        {"name": "hybrid_search"},
    ],
)
def test_step_schema_refuses_unknown_tools_and_arguments_that_do_not_fit(call: dict[str, object]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(call, step_schema(TOOLS))


# --- the call scanner ---


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "hybrid_search", "arguments": {"query": "Lisbon"}}',
        'I will look it up.\n```json\n{"name": "hybrid_search", "arguments": {"query": "Lisbon"}}\n```',
        'Sure: {"note": {"a": 1}} then {"name": "hybrid_search", "arguments": {"query": "Lisbon"}} done',
    ],
)
def test_find_call_reads_a_call_object_wherever_it_stands(text: str) -> None:
    found = find_call(text, TOOL_NAMES)

    assert found is not None
    assert (found.name, found.arguments) == ("hybrid_search", {"query": "Lisbon"})
    assert text[found.start : found.end].startswith('{"name"')


@pytest.mark.parametrize(
    "text",
    [
        "Lisbon is the capital of Portugal.",
        '{"name": "rm_rf", "arguments": {}}',
        '{"name": "hybrid_search", "arguments": "Lisbon"}',
        '{"name": "hybrid_search", "arguments": {"query": "Lisb',
        "A set {1, 2} and a dict {'name': 'hybrid_search'}",
    ],
)
def test_find_call_finds_nothing_in_answers_unknown_tools_or_broken_json(text: str) -> None:
    assert find_call(text, TOOL_NAMES) is None


def test_find_call_without_arguments_means_no_arguments() -> None:
    found = find_call('{"name": "list_entity_types"}', TOOL_NAMES)

    assert found is not None and found.arguments == {}


# --- hold-back streaming ---

CALL_TEXT = 'Let me check. {"name": "hybrid_search", "arguments": {"query": "Lisbon"}}'
FENCED_TEXT = 'Checking.\n```json\n{"name": "hybrid_search", "arguments": {}}\n```'
ANSWER_TEXT = "Lisbon is the capital of `Portugal`, see [Portugal](entity:country:PT)."


@pytest.mark.parametrize("text", [CALL_TEXT, FENCED_TEXT, ANSWER_TEXT])
def test_hold_back_shows_no_part_of_a_call_however_the_text_is_split(text: str) -> None:
    for cut in range(len(text) + 1):
        holdback = CallHoldback()

        shown = holdback.feed(text[:cut]) + holdback.feed(text[cut:])

        assert shown + holdback.held == text, cut
        assert "{" not in shown and "```" not in shown, cut


def test_hold_back_releases_plain_prose_at_once() -> None:
    holdback = CallHoldback()

    shown = [holdback.feed(piece) for piece in ["Lisbon ", "is the ", "capital."]]

    assert shown == ["Lisbon ", "is the ", "capital."]
    assert not holdback.holding


# --- the layout of tool results ---


def test_layout_writes_entities_as_citable_links_by_key_without_ids_or_scores() -> None:
    content = json.dumps({"results": [PORTUGAL]})

    text = layout_result(content)

    assert text == "results:\n- [Portugal](entity:country:PT) Country: Its capital is Lisbon."


def test_layout_of_edges_names_the_other_entity_as_a_link() -> None:
    content = json.dumps(
        {
            "entity": PORTUGAL,
            "edges": [
                {
                    "id": "e1",
                    "type": "BORDERS",
                    "direction": "out",
                    "other": {"id": "x", "key": "country:ES", "type": "Country", "name": "Spain"},
                }
            ],
        }
    )

    text = layout_result(content)

    assert "- type: BORDERS; direction: out; other: [Spain](entity:country:ES)" in text
    assert "3f72649e" not in text and "e1" not in text


def test_layout_caps_long_results_at_a_line_and_says_so() -> None:
    many = [{**PORTUGAL, "key": f"country:{i}", "name": f"Country {i}"} for i in range(100)]

    text = layout_result(json.dumps({"results": many}), limit=500)

    assert len(text) <= 500 + len("\n… (more results cut)")
    assert text.endswith("… (more results cut)")


@pytest.mark.parametrize("content", ['{"results": []}', "[]", '{"results": [], "total": null}'])
def test_layout_of_an_empty_result_says_there_is_nothing(content: str) -> None:
    assert layout_result(content) == "(no results)"


def test_layout_of_an_empty_search_while_entities_wait_for_vectors_says_there_is_nothing_yet() -> None:
    content = json.dumps({"results": [], "embedding": {"pending": 3}})

    text = layout_result(content)

    assert (
        text
        == "(no results)\n(3 entities of the graph are still being indexed: this search may have missed them.)"
    )


def test_layout_of_a_search_while_entities_wait_for_vectors_lists_the_hits_then_says_it_may_miss_some() -> (
    None
):
    content = json.dumps({"results": [PORTUGAL], "embedding": {"pending": 1}})

    text = layout_result(content)

    assert text == (
        "results:\n- [Portugal](entity:country:PT) Country: Its capital is Lisbon.\n"
        "(1 entity of the graph is still being indexed: this search may have missed it.)"
    )


def test_layout_of_an_error_keeps_the_message() -> None:
    assert layout_result('{"error": "unknown entity x", "code": "not_found"}') == "error: unknown entity x"


# --- the steps, against a real HTTP server ---


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as s:
        yield s


def provider_for(server: LLMTestServer, **kwargs: Any) -> SmallModelTurn:
    inner = OpenAICompatProvider(base_url=server.base_url, model="small", max_retries=0)
    return SmallModelTurn(inner=inner, **kwargs)


QUESTION = [
    ChatMessage(role="system", content="Be helpful."),
    ChatMessage(role="user", content="Capital of Portugal?"),
]


def after_calls(*calls: tuple[str, dict[str, object]]) -> list[ChatMessage]:
    messages = list(QUESTION)
    for n, (name, arguments) in enumerate(calls):
        call = ToolCallRequest(id=f"c{n}", name=name, arguments=dict(arguments))
        messages.append(ChatMessage(role="assistant", tool_calls=[call]))
        messages.append(
            ChatMessage(role="tool", tool_call_id=f"c{n}", content=json.dumps({"results": [PORTUGAL]}))
        )
    return messages


async def run(provider: SmallModelTurn, messages: list[ChatMessage]) -> list[StreamEvent]:
    config = GenerationConfig(model="small", temperature=0.1)
    return [event async for event in provider.stream(messages, TOOLS, config)]


async def test_first_step_of_a_turn_is_forced_by_the_step_schema(server: LLMTestServer) -> None:
    server.enqueue(Json(completion('{"name": "hybrid_search", "arguments": {"query": "Portugal"}}')))

    events = await run(provider_for(server), list(QUESTION))

    assert [type(e) for e in events] == [ToolCall, Done]
    assert isinstance(events[0], ToolCall)
    assert (events[0].name, events[0].arguments) == ("hybrid_search", {"query": "Portugal"})
    sent = server.requests[0]
    assert sent["response_format"]["json_schema"]["schema"] == step_schema(TOOLS)
    assert sent["cache_prompt"] is True and "tools" not in sent and not sent.get("stream")


async def test_llama_cpp_gets_the_step_schema_as_a_compact_llguidance_grammar(server: LLMTestServer) -> None:
    server.enqueue(Json(completion('{"name": "hybrid_search", "arguments": {"query": "Portugal"}}')))
    provider = provider_for(server, constrain="llguidance")

    events = await run(provider, list(QUESTION))

    assert isinstance(events[0], ToolCall) and events[0].name == "hybrid_search"
    sent = server.requests[0]
    assert "response_format" not in sent
    head, _, schema = sent["grammar"].partition("\nstart: %json ")
    assert head == "%llguidance {}"
    # The same schema, with JSON's whitespace fixed: the model cannot spend tokens indenting.
    assert json.loads(schema) == {
        **step_schema(TOOLS),
        "x-guidance": {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "},
    }


async def test_a_call_written_after_a_result_is_a_tool_call_and_is_never_streamed(
    server: LLMTestServer,
) -> None:
    call = '{"name": "get_entity_edges", "arguments": {"entity_id": "country:PT"}}'
    server.enqueue(Stream(text_chunks("Let me look. ", call[:20], call[20:], " thanks")))

    events = await run(
        provider_for(server, look_up=False), after_calls(("hybrid_search", {"query": "Portugal"}))
    )

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Let me look. "]
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.name, c.arguments) for c in calls] == [("get_entity_edges", {"entity_id": "country:PT"})]
    assert "Result of hybrid_search:\nresults:\n- [Portugal](entity:country:PT)" in json.dumps(
        server.requests[0]["messages"][-1]["content"]
    ).replace("\\n", "\n")


async def test_an_answer_after_a_result_streams_as_text(server: LLMTestServer) -> None:
    server.enqueue(Stream(text_chunks("The capital is ", "Lisbon ([Portugal](entity:country:PT)).")))

    events = await run(
        provider_for(server, look_up=False), after_calls(("hybrid_search", {"query": "Portugal"}))
    )

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (
        "The capital is Lisbon ([Portugal](entity:country:PT))."
    )
    assert not [e for e in events if isinstance(e, ToolCall)]


async def test_an_answer_that_repeats_itself_is_stopped_and_the_turn_ends(server: LLMTestServer) -> None:
    """Measured: the offline model wrote `"Drama", ` until its token cap, 121 s for one word."""
    server.enqueue(Stream(text_chunks('The words are "Drama", ', *['"Drama", '] * 200)))

    events = await run(
        provider_for(server, look_up=False), after_calls(("hybrid_search", {"query": "Portugal"}))
    )

    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.startswith('The words are "Drama", "Drama"')
    assert text.count("Drama") <= LOOP_REPEATS + 1
    assert isinstance(events[-1], Done)


@pytest.mark.parametrize(
    ("text", "loops"),
    [
        ('are "Drama", "Drama", "Drama", "Drama", "Drama", "Drama", ', True),
        ("Lisbon, Lisbon, Lisbon, Lisbon, Lisbon, Lisbon, ", True),
        ('are "Drama", "Drama", "Drama", "Drama", "Drama", ', False),  # five times: not yet
        ("| --- | --- | --- | --- | --- | --- | --- |", False),  # a table's row has no words
        ("Benin, Togo, Niger, Nigeria, Ghana, Mali, Chad, Libya, Sudan, Egypt", False),
    ],
)
def test_looping_is_one_piece_of_words_written_six_times_running(text: str, loops: bool) -> None:
    assert looping(text) is loops


async def test_a_repeated_call_gets_one_more_try_that_must_answer(server: LLMTestServer) -> None:
    server.enqueue(
        Stream(text_chunks('{"name": "hybrid_search", "arguments": {"query": "Portugal"}}')),
        Stream(text_chunks("Lisbon.")),
    )

    events = await run(
        provider_for(server, look_up=False), after_calls(("hybrid_search", {"query": "Portugal"}))
    )

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Lisbon."]
    assert "No more tool calls" in server.requests[1]["messages"][-1]["content"]


async def test_at_the_step_cap_the_model_is_told_to_answer_and_a_call_stays_text(
    server: LLMTestServer,
) -> None:
    server.enqueue(Stream(text_chunks('{"name": "list_entity_types", "arguments": {}}')))
    calls = [("hybrid_search", {"query": "a"}), ("hybrid_search", {"query": "b"})]

    events = await run(provider_for(server, max_tool_calls=2), after_calls(*calls))

    assert not [e for e in events if isinstance(e, ToolCall)]
    assert "No more tool calls" in server.requests[0]["messages"][-1]["content"]


def test_the_prompt_lays_out_calls_as_json_and_results_as_lines() -> None:
    messages = after_calls(("hybrid_search", {"query": "Portugal"}))

    prompt = prompt_messages(messages, TOOLS)

    assert [m.role for m in prompt] == ["system", "user", "assistant", "user"]
    assert "hybrid_search(query, types?, limit?)" in prompt[0].content
    assert prompt[0].content.startswith("Be helpful.")
    assert json.loads(prompt[2].content) == {"name": "hybrid_search", "arguments": {"query": "Portugal"}}
    assert prompt[3].content.startswith("Result of hybrid_search:\nresults:\n- [Portugal](entity:country:PT)")


def test_step_schema_offers_optional_arguments_only_when_they_are_closed_choices() -> None:
    branches = {b["properties"]["name"]["const"]: b for b in step_schema(TOOLS)["oneOf"]}

    assert set(branches["traverse_graph"]["properties"]["arguments"]["properties"]) == {
        "start_entity_id",
        "direction",
    }
    assert set(branches["hybrid_search"]["properties"]["arguments"]["properties"]) == {"query"}


async def test_plain_chat_without_tools_streams_the_answer_from_the_facts_it_was_given(
    server: LLMTestServer,
) -> None:
    server.enqueue(Stream(text_chunks("Lisbon.")))
    config = GenerationConfig(model="small")

    events = [e async for e in provider_for(server).stream(list(QUESTION), [], config)]

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Lisbon."]
    system = server.requests[0]["messages"][0]["content"]
    assert "Tools:" not in system and "use only the facts above" in system
    assert "response_format" not in server.requests[0]


def test_the_prompt_names_the_agents_own_search_and_edge_tools_in_its_strategy() -> None:
    prompt = prompt_messages(list(QUESTION), TOOLS)[0].content

    assert "Start with hybrid_search on the name" in prompt
    assert "get_entity_edges with its key" in prompt
    assert "Start with" not in prompt_messages(list(QUESTION), [spec("list_entity_types")])[0].content


@pytest.mark.parametrize(
    ("query", "noted"),
    [("Osfinzelund capital", True), ("capital of portugal", False), ("Portugal", False)],
)
def test_a_search_whose_results_name_nothing_the_query_names_says_so(query: str, noted: bool) -> None:
    call = ToolCallRequest(id="c0", name="hybrid_search", arguments={"query": query})
    messages = [
        *QUESTION,
        ChatMessage(role="assistant", tool_calls=[call]),
        ChatMessage(role="tool", tool_call_id="c0", content=json.dumps({"results": [PORTUGAL]})),
    ]

    result = prompt_messages(messages, TOOLS)[-1].content

    assert result.endswith(f'(No result has a name that appears in "{query}".)') is noted

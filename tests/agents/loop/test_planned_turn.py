"""A planned turn step by step against the local test server: the look-up of the names, the
shape and the plan under their schemas, the answer from the cards, and the ways back to the
earlier recipe."""

from __future__ import annotations

import json

import jsonschema
import pytest

from apps.agents.llm.base import (
    ChatMessage,
    Done,
    GenerationConfig,
    TextDelta,
    ToolCall,
)
from apps.agents.loop import candidates as paths
from apps.agents.loop import plan_graph, plan_turn
from apps.agents.loop.prompt import LOOKUP_ID_PREFIX
from apps.agents.loop.schema import step_schema
from tests.agents.loop.plan_support import (
    BENIN,
    LOOKUP,
    NAIRA,
    QUESTION,
    RELATIONSHIPS,
    TOOLS,
    after,
    entity,
    plan,
    provider_for,
    run,
)
from tests.llm_server import Json, LLMTestServer, Stream, completion, text_chunks

# --- a planned turn, step by step ---


async def test_a_per_item_plan_is_answered_by_the_loop_without_a_model_step(server: LLMTestServer):
    (arguments,) = paths.plan_candidates(
        plan(asks_for="Currency", relationships=["BORDERS", "USES_CURRENCY"], answer="each"),
        [BENIN],
        RELATIONSHIPS,
    )
    togo, franc = entity("country:TG", "Country", "Togo"), entity("currency:XOF", "Currency", "CFA Franc")
    result = {
        "start": [entity("country:BJ", "Country", "Benin")],
        "groups": [{"entity": togo, "count": 1, "members": [franc]}],
        "count": 1,
    }

    events = await run(provider_for(server), after(LOOKUP, ("call_1", "query_paths", arguments, result)))

    assert server.requests == []
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.endswith("- [Togo](entity:country:TG): [CFA Franc](entity:currency:XOF)")
    assert isinstance(events[-1], Done)


async def test_a_planned_turn_first_looks_up_the_names_the_question_mentions_without_the_model(
    server: LLMTestServer,
):
    events = await run(provider_for(server), list(QUESTION))

    assert [type(e) for e in events] == [ToolCall, Done]
    call = events[0]
    assert isinstance(call, ToolCall) and call.id.startswith(LOOKUP_ID_PREFIX)
    assert (call.name, call.arguments) == (
        "query_paths",
        plan_graph.mention_lookup("Which neighbours of Benin use the Naira?"),
    )
    assert server.requests == []


async def test_then_the_model_writes_the_shape_then_a_plan_under_its_schema_and_the_loop_runs_it(
    server: LLMTestServer,
):
    written = plan(**{"and": {"start": "Naira", "relationships": ["USES_CURRENCY"]}})
    written.pop("answer")
    server.enqueue(Json(completion(json.dumps({"answer": "list"}))))
    server.enqueue(Json(completion(json.dumps(written))))
    # A question whose words allow two shapes (a list, or the number of its items) is asked which.
    messages = after(LOOKUP)
    messages[1] = ChatMessage(
        role="user", content="What is the number of neighbours of Benin that use the Naira?"
    )

    events = await run(provider_for(server), messages)

    shape_sent, sent = server.requests
    jsonschema.validate({"answer": "list"}, shape_sent["response_format"]["json_schema"]["schema"])
    assert shape_sent["messages"][-1]["content"].endswith("The shape of the answer:")
    schema = sent["response_format"]["json_schema"]["schema"]
    jsonschema.validate(written, schema)
    assert sent["messages"][-1]["content"].endswith("Shape: list. The plan:")
    assert "Country -USES_CURRENCY-> Currency" in sent["messages"][0]["content"]
    assert "Entities named: Benin: Country" in sent["messages"][-1]["content"]
    call = events[0]
    assert isinstance(call, ToolCall) and not call.id.startswith(LOOKUP_ID_PREFIX)
    assert call.name == "query_paths"
    assert call.arguments["hops"][0]["in_path"]["start"] == [{"key": "currency:NGN"}]


async def test_the_answer_reads_the_plans_result_as_cards_of_names_and_links_what_it_names(
    server: LLMTestServer,
):
    nigeria = entity("country:NG", "Country", "Nigeria")
    (arguments,) = paths.plan_candidates(
        plan(**{"and": {"start": "Naira", "relationships": ["USES_CURRENCY"]}}), [BENIN, NAIRA], RELATIONSHIPS
    )
    result = {
        "start": [entity("country:BJ", "Country", "Benin")],
        "results": [{**nigeria, "path": []}],
        "count": 1,
    }
    server.enqueue(Stream(text_chunks("Nigeria uses ", "the Naira.")))

    events = await run(provider_for(server), after(LOOKUP, ("call_1", "query_paths", arguments, result)))

    prompt = server.requests[0]["messages"][-1]["content"]
    assert "Found in the graph:\nBenin -BORDERS- Country" in prompt
    assert "(only those also reached from the second entity named): Nigeria." in prompt
    assert "entity:" not in prompt  # the links cost the prompt tokens; the loop adds them
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "[Nigeria](entity:country:NG) uses the Naira."
    assert isinstance(events[-1], Done)


async def test_a_counts_answer_that_states_no_number_gets_the_count_after_it(server: LLMTestServer):
    (arguments,) = paths.plan_candidates(
        plan(start="Naira", relationships=["USES_CURRENCY"], answer="count"), [NAIRA], RELATIONSHIPS
    )
    found = [entity("country:NG", "Country", "Nigeria"), entity("country:BJ", "Country", "Benin")]
    result = {"start": [entity("currency:NGN", "Currency", "Naira")], "results": found, "count": 2}
    server.enqueue(Stream(text_chunks("The Naira is the currency in ", "Nigeria and Benin.")))

    events = await run(provider_for(server), after(LOOKUP, ("call_1", "query_paths", arguments, result)))

    assert arguments["result"] == "count"
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.endswith("Nigeria](entity:country:NG) and [Benin](entity:country:BJ).\n\nIn all: 2.")
    assert isinstance(events[-1], Done)


@pytest.mark.parametrize(
    ("answer", "added"),
    [
        ("There are 2 countries that use it.", ""),
        ("Two countries use it.", ""),
        ("It is used in [Benin](entity:c0a2-2-42) and Togo.", "\n\nIn all: 2."),  # a link's digits
        ("There are 3 countries.", "\n\nIn all: 2."),
    ],
)
def test_a_count_is_added_only_where_the_answer_does_not_state_it(answer, added):
    assert plan_turn.count_missing(answer, 2) == added
    assert plan_turn.count_missing(answer, None) == ""


FILMED_IN = [{"relationship": "FILMED_IN", "direction": "in", "type": "Movie"}]


async def test_a_long_list_is_added_whole_after_the_models_sentence(server: LLMTestServer):
    films = [entity(f"movie:{i}", "Movie", f"Film number {i}") for i in range(40)]
    result = {"start": [entity("country:BJ", "Country", "Benin")], "results": films, "count": 40}
    server.enqueue(Stream(text_chunks("Here they are.")))

    events = await run(
        provider_for(server),
        after(LOOKUP, ("call_1", "query_paths", {"start": [], "hops": FILMED_IN}, result)),
    )

    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "one short sentence that names the first three" in server.requests[0]["messages"][-1]["content"]
    assert text.startswith("Here they are.\n\nAll 40 found: [Film number 0](entity:movie:0)")
    assert "[Film number 39](entity:movie:39)" in text


# The loop's look-up of the names a question mentions, having found none.
NOTHING_NAMED = (
    f"{LOOKUP_ID_PREFIX}1",
    "query_paths",
    plan_graph.mention_lookup("?"),
    {"start": [], "results": [], "count": 0},
)


async def test_a_question_that_names_nothing_goes_the_earlier_way_a_forced_search(server: LLMTestServer):
    server.enqueue(Json(completion('{"name": "hybrid_search", "arguments": {"query": "Qualumistan"}}')))

    events = await run(provider_for(server), after(NOTHING_NAMED))

    assert server.requests[0]["response_format"]["json_schema"]["schema"] == step_schema(TOOLS[:2])
    assert isinstance(events[0], ToolCall) and events[0].name == "hybrid_search"


async def test_the_earlier_recipes_forced_search_reads_the_system_prompt_of_every_other_step(
    server: LLMTestServer,
):
    server.enqueue(Json(completion('{"name": "hybrid_search", "arguments": {"query": "Qualumistan"}}')))
    await run(provider_for(server), after(NOTHING_NAMED))
    searched = ("call_2", "hybrid_search", {"query": "Qualumistan"}, {"results": []})
    server.enqueue(Stream(text_chunks("I could not find it in the knowledge graph.")))

    await run(provider_for(server), after(NOTHING_NAMED, searched))

    forced, answer = server.requests
    # One system prompt for every step, the plan's included (its rules and the path tool): the
    # server's prompt cache holds it, instead of reading ~2,000 tokens anew at each switch.
    assert answer["messages"][0] == forced["messages"][0]
    assert "This graph's relationships" in forced["messages"][0]["content"]
    # The forced search still cannot call the path tool.
    assert forced["response_format"]["json_schema"]["schema"] == step_schema(TOOLS[:2])


async def test_a_plan_that_found_nothing_hands_over_to_the_look_ups_of_the_named_entities(
    server: LLMTestServer,
):
    arguments = {
        "start": [{"key": "country:BJ"}],
        "hops": [{"relationship": "BORDERS", "direction": "in", "type": "Country"}],
    }
    empty = {"start": [entity("country:BJ", "Country", "Benin")], "results": [], "count": 0}

    events = await run(provider_for(server), after(LOOKUP, ("call_1", "query_paths", arguments, empty)))

    call = events[0]
    assert isinstance(call, ToolCall) and call.id.startswith(LOOKUP_ID_PREFIX)
    assert (call.name, call.arguments) == ("get_entity_edges", {"entity_id": "country:BJ", "limit": 500})
    assert server.requests == []


@pytest.mark.parametrize("shape", ["entities", "exists"])
async def test_a_plan_along_no_relationship_that_reached_only_its_start_hands_over_to_its_look_ups(
    server: LLMTestServer, shape: str
):
    """ "describe the movie X in a few words" planned with no relationship reached X itself, and the
    answer invented a plot; "is X considered good" answered "Yes" because X exists."""
    benin = entity("country:BJ", "Country", "Benin")
    arguments = {"start": [{"key": "country:BJ"}], "hops": [], "result": shape}
    itself = {"start": [benin], "results": [{**benin, "path": [{"entity": benin}]}], "count": 1}
    if shape == "exists":
        itself["exists"] = True

    events = await run(provider_for(server), after(LOOKUP, ("call_1", "query_paths", arguments, itself)))

    call = events[0]
    assert isinstance(call, ToolCall) and call.id.startswith(LOOKUP_ID_PREFIX)
    assert (call.name, call.arguments) == ("get_entity_edges", {"entity_id": "country:BJ", "limit": 500})
    assert server.requests == []


async def test_an_agent_without_a_path_tool_takes_the_forced_search_and_its_prompt_has_no_plan_rules(
    server: LLMTestServer,
):
    server.enqueue(Json(completion('{"name": "hybrid_search", "arguments": {"query": "Benin"}}')))

    events = [
        e
        async for e in provider_for(server).stream(
            list(QUESTION), TOOLS[:2], GenerationConfig(model="small", temperature=0.1)
        )
    ]

    sent = server.requests[0]
    assert sent["response_format"]["json_schema"]["schema"] == step_schema(TOOLS[:2])
    assert "This graph's relationships" not in sent["messages"][0]["content"]
    assert isinstance(events[0], ToolCall) and events[0].name == "hybrid_search"


async def test_a_plan_the_graph_cannot_run_falls_back_to_the_forced_search_without_the_path_tool(
    server: LLMTestServer,
):
    # The question allows one shape, a list: the model is asked no shape, only the plan.
    server.enqueue(Json(completion("not a plan")))
    server.enqueue(Json(completion('{"name": "hybrid_search", "arguments": {"query": "Benin"}}')))

    events = await run(provider_for(server), after(LOOKUP))

    assert len(server.requests) == 2
    assert server.requests[1]["response_format"]["json_schema"]["schema"] == step_schema(TOOLS[:2])
    assert isinstance(events[0], ToolCall) and events[0].name == "hybrid_search"


async def test_after_a_plan_that_found_nothing_the_answer_reads_the_cards_and_not_the_empty_query(
    server: LLMTestServer,
):
    arguments = {
        "start": [{"key": "country:BJ"}],
        "hops": [{"relationship": "BORDERS", "direction": "in", "type": "Country"}],
    }
    benin = entity("country:BJ", "Country", "Benin")
    empty = {"start": [benin], "results": [], "count": 0}
    togo, naira = entity("country:TG", "Country", "Togo"), entity("currency:NGN", "Currency", "Naira")
    card = {
        "entity": benin,
        "edges": [
            {"type": "BORDERS", "direction": "out", "other": togo, "properties": {}},
            {
                "type": "BORDERS",
                "direction": "out",
                "other": entity("country:NE", "Country", "Niger"),
                "properties": {},
            },
        ],
    }
    naira_card = {"entity": naira, "edges": []}
    server.enqueue(Stream(text_chunks("Benin borders Togo.")))

    events = await run(
        provider_for(server),
        after(
            LOOKUP,
            ("call_1", "query_paths", arguments, empty),
            (f"{LOOKUP_ID_PREFIX}2", "get_entity_edges", {"entity_id": "country:BJ", "limit": 500}, card),
            (
                f"{LOOKUP_ID_PREFIX}3",
                "get_entity_edges",
                {"entity_id": "currency:NGN", "limit": 500},
                naira_card,
            ),
        ),
    )

    prompt = "\n".join(m["content"] for m in server.requests[0]["messages"][1:])
    assert "Looked up in the graph:" in prompt and "[Togo](entity:country:TG)" in prompt
    assert "query_paths" not in prompt
    assert any(isinstance(e, TextDelta) for e in events)


def test_results_a_short_lists_answer_leaves_out_are_added_after_it():
    arguments = {"start": [{"key": "country:BJ"}], "hops": [], "result": "entities"}
    found = [entity("country:TG", "Country", "Togo"), entity("country:NG", "Country", "Nigeria")]
    result = {"results": found, "count": 2}
    must = plan_turn.answer_must_name(arguments, result)

    lost = plan_turn.unnamed_results(
        "To answer this question, I'll follow these steps: 1. look up Benin.", must
    )
    some = plan_turn.unnamed_results("Benin borders Togo.", must)
    every = plan_turn.unnamed_results("Benin borders Togo and Nigeria.", must)

    assert lost == "\n\nFound in the graph: [Togo](entity:country:TG), [Nigeria](entity:country:NG)."
    assert some == "\n\nAlso found: [Nigeria](entity:country:NG)."
    assert every == ""
    # A count, a yes/no and a long list (added whole anyway) need no such line.
    assert plan_turn.answer_must_name({**arguments, "result": "count"}, result) == []
    assert plan_turn.answer_must_name({**arguments, "result": "exists"}, {**result, "exists": True}) == []
    many = [entity(f"c:{i}", "Country", f"C{i}") for i in range(plan_graph.CARD_SHOWN + 1)]
    assert plan_turn.answer_must_name(arguments, {"results": many, "count": len(many)}) == []

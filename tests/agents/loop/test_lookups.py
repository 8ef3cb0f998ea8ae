"""The small-model loop's own look-ups (named hits, functional neighbours) and the entity cards it reads.

Findings from ``make eval`` that these prove stay fixed: the 1.5B model never chained a second call
(two-hop questions answered with the city's country), miscounted borders it had to count itself,
and could not tell 1,354,128 from 700,000.
"""

from __future__ import annotations

import json
from typing import Any

from apps.agents.llm.base import ChatMessage, Done, GenerationConfig, ToolCall, ToolCallRequest, ToolSpec
from apps.agents.llm.openai_compat import OpenAICompatProvider
from apps.agents.loop.cards import AnswerLinker, card_entities, entity_card, question_number
from apps.agents.loop.lookups import TurnLookups, named_hits, next_lookup
from apps.agents.loop.prompt import LOOKUP_ID_PREFIX, prompt_messages
from apps.agents.loop.schema import first_step_tools, step_schema
from apps.agents.loop.turn import SmallModelTurn
from apps.graph_tools.registry import tool_get
from tests.llm_server import LLMTestServer, Stream, text_chunks


def spec(name: str) -> ToolSpec:
    tool = tool_get(name)
    return ToolSpec(
        name=tool.name, description=tool.description, parameters=tool.args_model.model_json_schema()
    )


TOOLS = [spec(n) for n in ("hybrid_search", "get_entity_edges", "list_entity_types")]


def entity(key: str, name: str, type_: str, **properties: Any) -> dict[str, Any]:
    return {"id": f"id-{key}", "key": key, "type": type_, "name": name, "properties": properties}


KUMASI = entity("city:kumasi", "Kumasi", "City", population=2_069_350)
GHANA = entity("country:gh", "Ghana", "Country")
ACCRA = entity("city:accra", "Accra", "City", population=1_963_264)
TAMALE = entity("city:tamale", "Tamale", "City", population=360_579)
TOGO = entity("country:tg", "Togo", "Country")
CEDI = entity("currency:ghs", "Cedi", "Currency")
AFRICA = entity("continent:af", "Africa", "Continent")


def edge(type_: str, direction: str, other: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"e-{type_}-{other['key']}", "type": type_, "direction": direction, "other": other}


def card(of: dict[str, Any], *edges: dict[str, Any]) -> dict[str, Any]:
    return {"entity": {**of, "description": f"{of['name']} is a place."}, "edges": list(edges)}


KUMASI_CARD = card(KUMASI, edge("LOCATED_IN", "out", GHANA))
GHANA_CARD = card(
    GHANA,
    edge("BORDERS", "out", TOGO),
    edge("BORDERS", "in", TOGO),
    edge("CAPITAL_OF", "in", ACCRA),
    edge("LOCATED_IN", "in", ACCRA),
    edge("LOCATED_IN", "in", KUMASI),
    edge("LOCATED_IN", "in", TAMALE),
    edge("LOCATED_IN", "out", AFRICA),
    edge("USES_CURRENCY", "out", CEDI),
)


class Turn:
    """A turn's messages as ADK hands them to the provider: the question, then calls and results."""

    def __init__(self, question: str) -> None:
        self.messages = [
            ChatMessage(role="system", content="Be helpful."),
            ChatMessage(role="user", content=question),
        ]

    def call(self, name: str, arguments: dict[str, Any], result: Any, *, by_loop: bool = False) -> Turn:
        call_id = f"{LOOKUP_ID_PREFIX if by_loop else 'call_'}{len(self.messages)}"
        self.messages.append(
            ChatMessage(
                role="assistant", tool_calls=[ToolCallRequest(id=call_id, name=name, arguments=arguments)]
            )
        )
        self.messages.append(ChatMessage(role="tool", tool_call_id=call_id, content=json.dumps(result)))
        return self

    @property
    def turn(self) -> list[ChatMessage]:
        return self.messages[2:]


def searched(question: str, query: str, *hits: dict[str, Any]) -> Turn:
    return Turn(question).call("hybrid_search", {"query": query}, {"results": list(hits)})


# --- which entities the loop looks up ---


def test_a_search_hit_named_in_the_query_is_looked_up_by_the_loop_with_the_edges_tool() -> None:
    turn = searched("Capital of the country where Kumasi lies?", "Kumasi country capital", TAMALE, KUMASI)

    assert next_lookup(turn.turn, TOOLS) == {"entity_id": "city:kumasi", "limit": 500}


def test_after_the_named_entity_its_single_outgoing_neighbour_is_looked_up_for_the_second_hop() -> None:
    turn = searched("Capital of the country where Kumasi lies?", "Kumasi", KUMASI)
    turn.call("get_entity_edges", {"entity_id": "city:kumasi", "limit": 500}, KUMASI_CARD, by_loop=True)

    assert next_lookup(turn.turn, TOOLS) == {"entity_id": "country:gh", "limit": 500}

    turn.call("get_entity_edges", {"entity_id": "country:gh", "limit": 500}, GHANA_CARD, by_loop=True)
    assert next_lookup(turn.turn, TOOLS) is None


def test_a_search_that_names_nothing_it_found_is_not_looked_up() -> None:
    turn = searched("Capital of Osfinzelund?", "Osfinzelund capital", GHANA, TOGO)

    assert next_lookup(turn.turn, TOOLS) is None


def test_no_look_up_without_an_edges_tool_among_the_agents_tools() -> None:
    turn = searched("Capital of Ghana?", "Ghana", GHANA)

    assert next_lookup(turn.turn, [spec("hybrid_search")]) is None


def test_the_longest_name_in_the_query_wins_and_a_name_inside_it_is_not_taken_too() -> None:
    sudan = entity("country:sd", "Sudan", "Country")
    south = entity("country:ss", "South Sudan", "Country")
    port = entity("city:ps", "Port Sudan", "City")

    assert [h["key"] for h in named_hits([sudan, port, south], "South Sudan borders")] == ["country:ss"]
    assert [h["key"] for h in named_hits([sudan, south], "SUDAN")] == ["country:sd"]


# --- the card the model reads ---


def test_a_card_counts_each_relationship_and_writes_a_two_way_one_once() -> None:
    text = entity_card(GHANA_CARD)

    assert text.splitlines()[0] == "[Ghana](entity:country:gh) Country: Ghana is a place."
    assert "- Ghana borders: [Togo](entity:country:tg)" in text
    assert "borders Ghana" not in text
    assert "- Ghana uses currency: [Cedi](entity:currency:ghs)" in text
    assert "- capital of Ghana: [Accra](entity:city:accra)" in text
    assert (
        "- 3 cities located in Ghana: [Kumasi](entity:city:kumasi), [Accra](entity:city:accra), [Tamale]"
        in text
    )


def test_a_neighbour_card_says_how_it_is_reached_and_leaves_out_the_way_back() -> None:
    text = entity_card(GHANA_CARD, via=(KUMASI, "LOCATED_IN"))

    assert text.startswith("Kumasi located in: [Ghana](entity:country:gh) Country\n")
    assert "capital of Ghana: [Accra](entity:city:accra)" in text
    assert "cities located in Ghana" not in text  # the group holds Kumasi: the way back


def test_members_are_compared_with_the_number_the_question_names() -> None:
    text = entity_card(GHANA_CARD, threshold=1_000_000)

    assert "[Kumasi](entity:city:kumasi) (population 2,069,350, more than 1,000,000)" in text
    assert "[Tamale](entity:city:tamale) (population 360,579, less than 1,000,000)" in text


def test_the_question_number_is_read_with_thousands_separators_and_only_when_alone() -> None:
    assert question_number("Which cities in X have more than 700,000 inhabitants?") == 700_000
    assert question_number("How many countries border X?") is None
    assert question_number("Cities over 50000 founded before 1900?") is None


# --- what the model is shown, and what the provider does ---


def test_the_answer_prompt_shows_the_cards_as_found_facts_not_as_calls_the_model_made() -> None:
    turn = searched("Capital of the country where Kumasi lies?", "Kumasi", KUMASI, TAMALE)
    turn.call("get_entity_edges", {"entity_id": "city:kumasi", "limit": 500}, KUMASI_CARD, by_loop=True)
    turn.call("get_entity_edges", {"entity_id": "country:gh", "limit": 500}, GHANA_CARD, by_loop=True)

    prompt = prompt_messages(turn.messages, TOOLS, answer_now=True)

    assert [m.role for m in prompt] == ["system", "user", "assistant", "user"]
    assert "get_entity_edges" not in prompt[2].content
    shown = prompt[3].content
    assert shown.startswith(
        "Result of hybrid_search: [Kumasi](entity:city:kumasi) (the other matches are about something else)"
    )
    assert "Tamale" not in shown.split("\n")[0]
    # No number of other matches: "(and 9 other matches)" was read as "10 countries border it".
    assert not any(ch.isdigit() for ch in shown.split("\n")[0])
    assert "Looked up in the graph:\n[Kumasi](entity:city:kumasi) City" in shown
    assert "\nKumasi located in: [Ghana](entity:country:gh) Country\n" in shown
    assert "\n- capital of Ghana: [Accra](entity:city:accra)\n" in shown
    assert shown.endswith("No more tool calls: write the answer now.")


async def test_the_provider_makes_the_look_ups_without_asking_the_model_then_asks_for_the_answer() -> None:
    with LLMTestServer() as server:
        server.enqueue(Stream(text_chunks("Accra.")))
        inner = OpenAICompatProvider(base_url=server.base_url, model="small", max_retries=0)
        provider = SmallModelTurn(inner=inner)
        turn = searched("Capital of the country where Kumasi lies?", "Kumasi", KUMASI)
        config = GenerationConfig(model="small")

        first = [e async for e in provider.stream(turn.messages, TOOLS, config)]
        turn.call("get_entity_edges", {"entity_id": "city:kumasi", "limit": 500}, KUMASI_CARD, by_loop=True)
        second = [e async for e in provider.stream(turn.messages, TOOLS, config)]
        turn.call("get_entity_edges", {"entity_id": "country:gh", "limit": 500}, GHANA_CARD, by_loop=True)
        answer = [e async for e in provider.stream(turn.messages, TOOLS, config)]

    for events, key in ((first, "city:kumasi"), (second, "country:gh")):
        assert [type(e) for e in events] == [ToolCall, Done]
        assert isinstance(events[0], ToolCall) and events[0].id.startswith(LOOKUP_ID_PREFIX)
        assert (events[0].name, events[0].arguments) == ("get_entity_edges", {"entity_id": key, "limit": 500})
    # The answer names Accra, which Ghana's card showed: the loop links it.
    assert [getattr(e, "text", None) for e in answer if not isinstance(e, Done)] == [
        "[Accra](entity:city:accra)."
    ]
    assert len(server.requests) == 1  # the look-ups asked the model nothing
    assert "No more tool calls" in server.requests[0]["messages"][-1]["content"]


def test_a_search_that_names_nothing_is_shown_short_with_the_note_that_nothing_is_named() -> None:
    hits = [{**entity(f"city:{i}", f"Town {i}", "City"), "description": "x" * 400} for i in range(10)]
    turn = searched("Capital of Osfinzelund?", "Osfinzelund capital", *hits)

    shown = prompt_messages(turn.messages, TOOLS)[-1].content

    assert shown.count("\n- [Town") == 6
    assert max(len(line) for line in shown.splitlines()) < 260
    assert shown.endswith('(No result has a name that appears in "Osfinzelund capital".)')


def test_a_description_is_cut_at_a_sentence_end_never_inside_a_list() -> None:
    long = "Zambia is a country in Africa. " + "It borders Zimbabwe, Tanzania, Mozambique, " * 8
    data = {"entity": {**entity("country:zm", "Zambia", "Country"), "description": long}, "edges": []}

    head = entity_card(data).splitlines()[0]

    assert head.endswith("Zambia is a country in Africa.")


def test_the_forced_first_step_never_offers_a_tool_it_could_only_call_blind() -> None:
    tools = [spec(n) for n in ("hybrid_search", "query_entities", "list_entity_types")]

    offered = [b["properties"]["name"]["const"] for b in step_schema(first_step_tools(tools))["oneOf"]]

    assert offered == ["hybrid_search", "list_entity_types"]
    assert first_step_tools([spec("query_entities")]) == [spec("query_entities")]


# --- links for what the answer names ---


def linked(deltas: list[str], cards: list[dict[str, Any]]) -> str:
    lookups = TurnLookups(
        named=[], cards={c["entity"]["key"]: c for c in cards}, looked_up=set(), searched=True
    )
    linker = AnswerLinker(card_entities(lookups))
    return "".join(linker.feed(d) for d in deltas) + linker.flush()


def test_the_first_mention_of_each_card_entity_becomes_its_link_even_across_deltas() -> None:
    text = linked(["The capital of Gh", "ana is Ac", "cra; Accra lies in Ghana."], [GHANA_CARD])

    assert (
        text
        == "The capital of [Ghana](entity:country:gh) is [Accra](entity:city:accra); Accra lies in Ghana."
    )


def test_a_name_inside_a_longer_word_is_not_linked() -> None:
    assert linked(["Ghanaian food; To", "golese"], [GHANA_CARD]) == "Ghanaian food; Togolese"


def test_an_answer_that_writes_its_own_links_is_left_as_written() -> None:
    written = "[Accra](entity:city:accra) is in Ghana."

    assert linked([written[:9], written[9:]], [GHANA_CARD]) == written


def test_a_name_two_card_entities_share_is_not_linked() -> None:
    other_accra = entity("city:accra-2", "Accra", "City")
    cards = [GHANA_CARD, card(TOGO, edge("LOCATED_IN", "in", other_accra))]

    assert linked(["Accra and Togo."], cards) == "Accra and [Togo](entity:country:tg)."

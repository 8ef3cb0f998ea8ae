"""The small-model loop reading the documents' passages hop by hop (``apps.agents.loop.reading``).

Each step runs against the local OpenAI-compatible test server with the model's JSON answers
scripted, so what the loop searches, what it asks the model and what it answers are checked as
they happen. The first step is the model's forced choice of a tool: the documents are read when
it chooses them, or when the graph it chose finds nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

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
from apps.agents.loop.answer_forms import headline, nationality_over_descent, with_alias
from apps.agents.loop.compared import same_value
from apps.agents.loop.passage_text import bridge_name, focus, reading_of
from apps.agents.loop.reading import NOT_FOUND, READ_PREFIX, about, names_asked
from apps.agents.loop.turn import SmallModelTurn
from apps.graph_tools.registry import tool_get
from tests.llm_server import Json, LLMTestServer, completion


def spec(name: str) -> ToolSpec:
    tool = tool_get(name)
    return ToolSpec(
        name=tool.name, description=tool.description, parameters=tool.args_model.model_json_schema()
    )


TOOLS = [spec(n) for n in ("hybrid_search", "get_entity_edges", "search_passages")]


def passage(key: str, text: str) -> dict[str, Any]:
    return {
        "id": f"00000000-0000-4000-8000-00000000000{key}",
        "document_id": f"10000000-0000-4000-8000-00000000000{key}",
        "document_name": f"doc-{key}.txt",
        "ordinal": 0,
        "page": None,
        "char_start": 0,
        "char_end": len(text),
        "text": text,
    }


FILM = passage("1", "Night Shift (1999 film): Night Shift is a drama film written and directed by Vera Lind.")
OTHER_FILM = passage("2", "Day Shift: Day Shift is a comedy directed by Otto Brandl.")
DIRECTOR = passage("3", "Vera Lind: Vera Lind (born 4 May 1950 in Tartu) is an Estonian film director.")
OTTO = passage("4", "Otto Brandl: Otto Brandl (12 June 1931 – 1990) was an Austrian director.")


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as s:
        yield s


def provider_for(server: LLMTestServer) -> SmallModelTurn:
    inner = OpenAICompatProvider(base_url=server.base_url, model="small", max_retries=0)
    return SmallModelTurn(inner=inner)


def asked(question: str) -> list[ChatMessage]:
    return [ChatMessage(role="system", content="Be helpful."), ChatMessage(role="user", content=question)]


def answered(
    messages: list[ChatMessage], events: list[StreamEvent], results: list[list[dict[str, Any]]]
) -> None:
    """The step's calls and their ``results`` appended to ``messages``, as ADK hands them back."""
    calls = [e for e in events if isinstance(e, ToolCall)]
    requests = [ToolCallRequest(id=c.id, name=c.name, arguments=c.arguments) for c in calls]
    messages.append(ChatMessage(role="assistant", tool_calls=requests))
    for call, found in zip(calls, results, strict=True):
        messages.append(
            ChatMessage(role="tool", tool_call_id=call.id, content=json.dumps({"results": found}))
        )


async def step(server: LLMTestServer, messages: list[ChatMessage]) -> list[StreamEvent]:
    config = GenerationConfig(model="small", temperature=0.1)
    return [event async for event in provider_for(server).stream(messages, TOOLS, config)]


def user_text(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


async def test_a_two_hop_question_searches_again_with_the_bridge_a_passage_named_and_cites_both(
    server: LLMTestServer,
) -> None:
    messages = asked("Where was the director of film Night Shift (1999 Film) born?")
    server.enqueue(Json(completion('{"name": "search_passages", "arguments": {"query": "Night Shift"}}')))
    first = await step(server, messages)
    answered(messages, first, [[FILM, OTHER_FILM]])
    server.enqueue(Json(completion('{"passage": 1, "answer": "Vera Lind"}')))

    second = await step(server, messages)
    answered(messages, second, [[DIRECTOR, FILM]])
    server.enqueue(Json(completion('{"passage": 1, "answer": "Tartu"}')))
    third = await step(server, messages)

    assert [type(e) for e in first] == [ToolCall, Done]
    assert isinstance(first[0], ToolCall) and first[0].id.startswith(READ_PREFIX)
    assert first[0].arguments == {"query": "Where was the director of film Night Shift (1999 Film) born?"}
    assert isinstance(second[0], ToolCall) and second[0].arguments == {"query": "Where was Vera Lind born?"}
    assert (
        "Question: Who is the director of film Night Shift (1999 Film)? (the answer is a name)"
        in user_text(server.requests[1])
    )
    assert "[1] Night Shift (1999 film)" in user_text(server.requests[1])
    assert "Question: Where was Vera Lind born? (the answer is a place)" in user_text(server.requests[2])
    assert server.requests[2]["response_format"]["json_schema"]["schema"]["properties"]["passage"][
        "enum"
    ] == [0, 1, 2]
    text = "".join(e.text for e in third if isinstance(e, TextDelta))
    assert text.startswith("Tartu.")
    assert f"(passage:{FILM['id']})" in text and f"(passage:{DIRECTOR['id']})" in text
    assert isinstance(third[-1], Done) and third[-1].finish_reason == "stop"


async def test_a_comparison_of_dates_searches_both_things_at_once_and_decides_by_the_dates(
    server: LLMTestServer,
) -> None:
    messages = asked("Who was born first, Vera Lind or Otto Brandl?")
    server.enqueue(Json(completion('{"name": "hybrid_search", "arguments": {"query": "Vera Lind"}}')))
    graph = await step(server, messages)
    answered(messages, graph, [[]])
    first = await step(server, messages)
    answered(messages, first, [[DIRECTOR], [OTTO]])
    server.enqueue(
        Json(completion('{"passage": 1, "answer": "4 May 1950"}')),
        Json(completion('{"passage": 1, "answer": "12 June 1931"}')),
    )

    second = await step(server, messages)

    assert [e.arguments for e in first if isinstance(e, ToolCall)] == [
        {"query": "When was Vera Lind born?"},
        {"query": "When was Otto Brandl born?"},
    ]
    text = "".join(e.text for e in second if isinstance(e, TextDelta))
    assert text.startswith("Otto Brandl.")
    assert f"(passage:{DIRECTOR['id']})" in text and f"(passage:{OTTO['id']})" in text
    assert [e.name for e in graph if isinstance(e, ToolCall)] == ["hybrid_search"]  # the graph first
    assert len(server.requests) == 3  # the dates decided it: the model was not asked to choose


async def born_where(server: LLMTestServer, *readings: str) -> str:
    """The answer to "Where was Vera Lind born?" when the model searches, is shown her passage and
    writes ``readings`` (each a reading's JSON), one per request."""
    messages = asked("Where was Vera Lind born?")
    server.enqueue(Json(completion('{"name": "search_passages", "arguments": {"query": "Vera Lind"}}')))
    first = await step(server, messages)
    answered(messages, first, [[DIRECTOR]])
    for reading in readings:
        server.enqueue(Json(completion(reading)))
    return "".join(e.text for e in await step(server, messages) if isinstance(e, TextDelta))


async def test_an_answer_that_no_passage_shown_holds_is_not_given(server: LLMTestServer) -> None:
    assert await born_where(server, '{"passage": 1, "answer": "Helsinki"}') == NOT_FOUND


async def test_a_date_read_where_a_place_is_asked_is_read_again_as_not_a_date(server: LLMTestServer) -> None:
    text = await born_where(
        server, '{"passage": 1, "answer": "4 May 1950"}', '{"passage": 1, "answer": "Tartu"}'
    )

    assert "(the answer is a place)" in user_text(server.requests[1])
    assert "(the answer is a place, not a date)" in user_text(server.requests[2])
    assert text.startswith("Tartu.") and f"(passage:{DIRECTOR['id']})" in text


async def test_an_answer_the_question_itself_names_is_read_again_as_not_it(server: LLMTestServer) -> None:
    text = await born_where(
        server, '{"passage": 1, "answer": "Vera Lind"}', '{"passage": 1, "answer": "Tartu"}'
    )

    assert "(the answer is a place, not Vera Lind)" in user_text(server.requests[2])
    assert text.startswith("Tartu.")


async def test_an_answer_the_question_names_twice_is_not_given(server: LLMTestServer) -> None:
    text = await born_where(
        server, '{"passage": 1, "answer": "Vera Lind"}', '{"passage": 1, "answer": "Lind"}'
    )

    assert text == NOT_FOUND


MIMICA = passage(
    "6",
    "Vatroslav Mimica (born 25 June 1923) is a Croatian film director. "
    + " ".join(f"In {1950 + n} he made his film number {n} at Jadran Film." for n in range(30))
    + " His son Sergio Mimica-Gezzan is an American film and television director.",
)


def test_a_long_passage_keeps_its_first_sentence_and_those_that_bear_on_the_question() -> None:
    text = focus(str(MIMICA["text"]), "Who is the child of Vatroslav Mimica?", 800)

    assert len(text) <= 800
    assert text.startswith("Vatroslav Mimica (born 25 June 1923) is a Croatian film director.")
    assert text.endswith("His son Sergio Mimica-Gezzan is an American film and television director.")
    assert "… " in text  # the sentences left out are marked
    assert focus("A short passage. It fits.", "Who?", 800) == "A short passage. It fits."


ROOM = passage("7", "Inside the Room: Inside the Room is a 1935 British mystery film.")


def test_a_country_is_read_in_a_passage_that_writes_its_demonym_and_answered_in_both_forms() -> None:
    reading = reading_of({"passage": 1, "answer": "United Kingdom"}, [ROOM], "a place")

    assert reading.answer == "British" and reading.passage == ROOM
    assert headline("Which country is Inside the Room from?", "British") == "British (United Kingdom)"
    assert headline("What nationality is Hans Salter?", "Austria") == "Austria (Austrian)"
    assert headline("Where was Hans Salter born?", "Austria") == "Austria"  # no country asked


def test_a_nationality_read_with_more_words_is_given_by_its_first_and_a_shared_demonym_by_its_country() -> (
    None
):
    assert headline("What nationality is the performer of song Am I Wrong?", "French DJ") == "French (France)"
    assert headline("Which country is the singer from?", "American") == "American (United States)"
    assert headline("What nationality is Waylon Payne?", "American singer") == "American (United States)"
    assert headline("What nationality is the DJ?", "DJ Snake") == "DJ Snake"  # not Djibouti's code


VEGA = (
    "Frances Marie Vega (September 2, 1983 – November 2, 2003) was a United States Army soldier who was"
    " killed in the Iraq War. She is the first female soldier of Puerto Rican descent to have died in"
    " combat in the Iraq War."
)


def test_a_nationality_read_as_the_people_someone_descends_from_is_the_one_the_passage_describes_them_by() -> (
    None
):
    assert nationality_over_descent("Puerto Rican", VEGA) == "United States"
    assert nationality_over_descent("American", VEGA) == "American"  # not read as a descent
    assert nationality_over_descent("Irish", "Ann Lee is of Irish descent.") == "Irish"  # nothing else said
    assert nationality_over_descent("Irish", "Ann Lee was an Irish actress of Irish descent.") == "Irish"
    assert nationality_over_descent("Panamanian-American", "DJ Clue is a hip hop DJ.") == "American"
    assert nationality_over_descent("Austria-Hungary", "…") == "Austria-Hungary"  # one country's name


def test_the_other_name_a_passage_gives_right_after_the_answer_is_kept_beside_it() -> None:
    cortes = "Cortés married María del Pilar Cordero, who adopted the stage name of Mapy Cortés. The couple"
    socrates = "Socrates (– 399 BC) was a classical Greek (Athenian) philosopher"

    assert with_alias("María del Pilar Cordero", cortes) == "María del Pilar Cordero (Mapy Cortés)"
    assert with_alias("Greek", socrates) == "Greek (Athenian)"
    assert headline("What nationality is Socrates?", "Greek (Athenian)") == "Greek (Athenian, Greece)"
    assert (
        with_alias("Gordon Sumner", "Gordon Sumner, better known as Sting, is a singer.")
        == "Gordon Sumner (Sting)"
    )
    # Not a name: a qualifier in lower case, a year, a language's gloss.
    assert with_alias("Sting", "Sting (musician) is a singer.") == "Sting"
    assert with_alias("Rome", "Rome (1950) is a film.") == "Rome"
    assert with_alias("Munich", "Munich (German: München) is a city.") == "Munich"


def test_two_years_written_as_one_uncertain_date_are_given_as_either() -> None:
    assert headline("What is the date of birth of Nicholas the Small?", "1322/1327") == "1322 or 1327"
    assert headline("When was it founded?", "12/05/1990") == "12/05/1990"  # a date, not two years


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [("Danish", "Denmark", True), ("British", "American", False), ("Rome", "Rome, Italy", True)],
)
def test_two_answers_name_the_same_country_by_name_or_demonym(first: str, second: str, same: bool) -> None:
    assert same_value(first, second) is same


@pytest.mark.parametrize(
    ("answer", "name"),
    [
        ("Vera Lind", "Vera Lind"),
        ("Tallinn is located in northern Estonia near the sea", "Estonia"),
        ("Night Shift", ""),  # the question holds it already: no hop
        ("Johannetta of Sayn- Wittgenstein", "Johannetta of Sayn-Wittgenstein"),  # a split hyphen joined
        ("", ""),
    ],
)
def test_a_bridge_is_a_name_the_question_does_not_hold(answer: str, name: str) -> None:
    assert bridge_name(answer, "Who leads the country where Tallinn is located, Night Shift?") == name


def test_a_sentence_gives_the_name_after_the_word_that_writes_the_descriptions_head() -> None:
    sentence = "Night Shift is a 1999 drama film directed by Vera Lind and produced by Otto Brandl."

    assert bridge_name(sentence, "When was the director of Night Shift born?", "director") == "Vera Lind"
    assert bridge_name(sentence, "When was the producer of Night Shift born?", "producer") == "Otto Brandl"
    assert (
        bridge_name(sentence, "When was the star of Night Shift born?", "star") == "Otto Brandl"
    )  # no cue: the last


SALTER = passage("5", "Hans Salter (14 January 1896 in Lviv) was an Austrian-American film composer.")


@pytest.mark.parametrize(
    ("answer", "kind", "read"),
    [
        ("Austria", "a place", "Austrian"),  # as the passage writes it
        ("Lviv", "a place", "Lviv"),
        ("14 January 1896", "a place", ""),  # a date where a place was asked: none
        ("14 January 1896", "a date", "14 January 1896"),
        ("Vienna", "a place", ""),  # no passage shown holds it
    ],
)
def test_a_reading_is_an_answer_a_passage_holds_of_the_kind_the_question_asks(
    answer: str, kind: str, read: str
) -> None:
    reading = reading_of({"passage": 1, "answer": answer}, [SALTER], kind)

    assert reading.answer == read
    assert reading.passage == (SALTER if read else None)


def test_a_place_is_read_with_the_region_the_passage_writes_after_it() -> None:
    berry = passage("8", "Chuck Berry was born in St. Louis, Missouri, on October 18, 1926.")

    assert (
        reading_of({"passage": 1, "answer": "St. Louis"}, [berry], "a place").answer == "St. Louis, Missouri"
    )
    assert reading_of({"passage": 1, "answer": "Missouri"}, [berry], "a place").answer == "Missouri"


def test_a_namesakes_passage_is_not_read_where_a_passage_names_the_name_whole() -> None:
    pia = passage("9", "Pia Ravenna: Pia Ravenna (born Hjordis Tilgmann) was a Finnish soprano.")
    domenico = passage("a", "Domenico Ravenna: Domenico Ravenna (1584 - 1637) was a Roman Catholic prelate.")
    later = {**passage("b", "Ravenna served as Bishop of Nicastro."), "document_id": domenico["document_id"]}

    assert about("Where was Domenico Ravenna born?", [pia, domenico, later]) == [domenico, later]
    assert about("Where was Carlo Ravenna born?", [pia, domenico]) == [pia, domenico]  # none whole: all


@pytest.mark.parametrize(
    ("answer", "asked"),
    [
        ("Dame Sibyl Hathaway", True),  # the question's name with a title
        ("Neil Young", True),  # the name a hop resolved
        ("Leopoldo Torre Nilsson", False),  # a child named after the parent
        ("Astrid Young", False),
    ],
)
def test_an_answer_is_what_the_question_names_only_when_it_is_or_holds_one_of_its_names(
    answer: str, asked: bool
) -> None:
    questions = (
        "Who is Sibyl Hathaway's sibling?",
        "Who is the sibling of Neil Young or Leopoldo Torres Ríos?",
    )

    assert names_asked(answer, questions) is asked


@pytest.mark.parametrize(
    ("answer", "question", "asked"),
    [
        ("The United Kingdom", "Where is the district that Knott is part of located in the UK?", True),
        ("Cumbria", "Where is the district that Knott is part of located in the UK?", False),
        ("British", "Which country is the UK film Spooks from?", False),  # a country asked
    ],
)
def test_a_country_the_question_names_in_another_form_is_not_what_it_asks(
    answer: str, question: str, asked: bool
) -> None:
    assert names_asked(answer, (question,)) is asked

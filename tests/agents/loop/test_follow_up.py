"""A follow-up read on its own (``apps.agents.loop.follow_up``): its pronouns replaced by what
they stand for in the previous turn, so the reading loop and plain RAG search the documents for a
name. The names are invented for these tests."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from apps.agents.history import HistoryMessage
from apps.agents.llm.base import ChatMessage, ToolCall
from apps.agents.loop.follow_up import standalone, standalone_question
from apps.chat.turns.plain_turn import _query
from tests.agents.loop.test_reading import answered, passage, step
from tests.llm_server import Json, LLMTestServer, completion


@pytest.mark.parametrize(
    ("before", "answer", "question", "expected"),
    [
        # a "who" question's answer is "he", "his", "her"
        ("Who directed Night Shift?", "Vera Lind.\n\n- …", "When was she born?", "When was Vera Lind born?"),
        ("Who directed Night Shift?", "Vera Lind.", "Who is her husband?", "Who is Vera Lind's husband?"),
        ("Who directed Night Shift?", "Vera Lind.", "Who married her?", "Who married Vera Lind?"),
        # "it" is the previous question's name when that question asked for a person or a date
        (
            "Who directed Jump for Glory?",
            "Vera Lind.",
            "When was it released?",
            "When was Jump for Glory released?",
        ),
        # a "which" question's answer is "it"
        (
            "Which film did Vera Lind direct?",
            "Night Shift.",
            "Who starred in it?",
            "Who starred in Night Shift?",
        ),
        (
            "What film did Vera Lind direct?",
            "Night Shift.",
            "When was it released?",
            "When was Night Shift released?",
        ),
        # an attribute's answer: "its" is still the previous question's name
        ("What is the capital of Norland?", "Norvik.", "And its currency?", "And Norland's currency?"),
        # a person the previous question described: the description, resolved again
        (
            "Where was the director of Night Shift born?",
            "Tartu.",
            "Who did she marry?",
            "Who did the director of Night Shift marry?",
        ),
        # an answer that is no name: the previous question's name
        (
            "When was Otto Brandl born?",
            "12 June 1931.",
            "Where did he die?",
            "Where did Otto Brandl die?",
        ),
        (
            "Who directed Night Shift?",
            "I could not find it in the knowledge graph or in the documents.",
            "When was it released?",
            "When was Night Shift released?",
        ),
    ],
)
def test_a_follow_ups_pronoun_is_replaced_by_what_it_stands_for(
    before: str, answer: str, question: str, expected: str
) -> None:
    assert standalone(question, before, answer) == expected


@pytest.mark.parametrize(
    ("before", "question"),
    [
        ("Who directed Night Shift?", "When was Day Shift released?"),  # it names its own subject
        ("", "When was he born?"),  # no earlier turn
        ("Who directed Night Shift?", "Which film came out first?"),  # no pronoun
    ],
)
def test_a_question_that_names_something_or_has_no_earlier_turn_is_read_as_it_is(
    before: str, question: str
) -> None:
    assert standalone(question, before, "Vera Lind.") == question


async def test_a_follow_up_on_documents_searches_for_the_previous_answers_name() -> None:
    messages = [
        ChatMessage(role="system", content="Be helpful."),
        ChatMessage(role="user", content="Who directed Night Shift?"),
        ChatMessage(role="assistant", content="Vera Lind.\n\n- Who directed Night Shift? Vera Lind"),
        ChatMessage(role="user", content="Where was she born?"),
    ]
    director = passage("3", "Vera Lind: Vera Lind (born 4 May 1950 in Tartu) is an Estonian film director.")
    with LLMTestServer() as server:
        server.enqueue(Json(completion('{"name": "search_passages", "arguments": {"query": "born"}}')))
        first = await step(server, messages)
        answered(messages, first, [[director]])
        server.enqueue(Json(completion('{"passage": 1, "answer": "Tartu"}')))
        second = await step(server, messages)

    assert standalone_question(messages) == "Where was Vera Lind born?"
    assert isinstance(first[0], ToolCall) and first[0].arguments == {"query": "Where was Vera Lind born?"}
    assert "Question: Where was Vera Lind born?" in str(server.requests[-1]["messages"][-1]["content"])
    assert "".join(getattr(e, "text", "") for e in second).startswith("Tartu.")


def test_plain_rag_retrieves_with_the_follow_up_read_on_its_own() -> None:
    turn = SimpleNamespace(
        history=[
            HistoryMessage(role="user", content="Which museum did Vera Lind found?"),
            HistoryMessage(role="assistant", content="The Glass Museum."),
        ],
        user_message=SimpleNamespace(content="When did it open?"),
    )

    assert _query(turn) == "When did The Glass Museum open?"  # type: ignore[arg-type]

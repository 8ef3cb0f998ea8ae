"""Passages of documents as the small model reads them (``layout``), and when the loop searches
them itself (``lookups.passage_search``)."""

from __future__ import annotations

import json

import pytest

from apps.agents.llm.base import ChatMessage, ToolCallRequest, ToolSpec
from apps.agents.loop.layout import PASSAGE_TEXT_MAX, layout_passages, layout_result
from apps.agents.loop.lookups import (
    TurnLookups,
    passage_search,
    passages_drawn_on,
    passages_tool,
    sources_line,
    turn_passages,
)
from apps.agents.loop.prompt import system_prompt
from apps.graph_tools.registry import tool_get

PASSAGE = {
    "id": "5a0c7a8e-1d7b-4f57-9d36-1b1f0e6e2a11",
    "document_id": "0f6e6b55-52f3-4a3b-9a43-4a8a4c1c3e02",
    "document_name": "paris-guide.md",
    "ordinal": 1,
    "page": None,
    "char_start": 14,
    "char_end": 82,
    "text": "The Eiffel Tower in Paris\nwas finished in 1889 for the World's Fair.",
    "score": 0.032,
}
LINK = f"[paris-guide.md](passage:{PASSAGE['id']})"


def spec(name: str) -> ToolSpec:
    tool = tool_get(name)
    return ToolSpec(
        name=tool.name, description=tool.description, parameters=tool.args_model.model_json_schema()
    )


GRAPH_TOOLS = [spec(n) for n in ("hybrid_search", "get_entity_edges", "list_entity_types")]
WITH_PASSAGES = [*GRAPH_TOOLS, spec("search_passages")]


def test_a_passage_reads_as_a_citable_link_with_its_document_and_text_on_one_line() -> None:
    text = layout_passages(json.dumps({"results": [PASSAGE]}))

    assert text == f"- {LINK}: The Eiffel Tower in Paris was finished in 1889 for the World's Fair."


def test_a_passage_search_laid_out_as_any_result_also_shows_each_passage_as_a_link() -> None:
    text = layout_result(json.dumps({"results": [{**PASSAGE, "page": 3}]}))

    assert text == (
        f"results:\n- {LINK} page 3: The Eiffel Tower in Paris was finished in 1889 for the World's Fair."
    )


def test_a_long_passage_is_cut_at_a_sentence_end_and_the_result_at_a_line() -> None:
    sentences = " ".join(f"Sentence number {i} says something about the tower." for i in range(40))
    passages = [{**PASSAGE, "id": f"p{i}", "text": sentences} for i in range(10)]

    text = layout_passages(json.dumps({"results": passages}), limit=1000)

    first = text.splitlines()[0]
    assert (
        first.endswith("tower.") and len(first) <= len("- [paris-guide.md](passage:p0): ") + PASSAGE_TEXT_MAX
    )
    assert text.endswith("… (more results cut)")
    assert len(text) <= 1000 + len("\n… (more results cut)")


def test_a_passage_search_while_passages_wait_for_vectors_says_passages_may_be_missed() -> None:
    empty = layout_passages(json.dumps({"results": [], "embedding": {"pending": 2}}))
    found = layout_result(json.dumps({"results": [PASSAGE], "embedding": {"pending": 1}}))

    assert empty == (
        "(no results)\n(2 passages of the documents are still being indexed: this search may have missed them.)"
    )
    assert found.endswith(
        "\n(1 passage of the documents is still being indexed: this search may have missed it.)"
    )


def test_the_passage_rule_is_in_the_prompt_only_when_a_passage_search_is_offered() -> None:
    assert passages_tool(GRAPH_TOOLS) is None
    assert passages_tool(WITH_PASSAGES) == "search_passages"
    assert "passage" not in system_prompt("Be helpful.", GRAPH_TOOLS)
    assert "[document name](passage:<id>)" in system_prompt("Be helpful.", WITH_PASSAGES)


def _turn(*calls: tuple[str, dict[str, object]]) -> list[ChatMessage]:
    return [
        ChatMessage(
            role="assistant", tool_calls=[ToolCallRequest(id=f"c{n}", name=name, arguments=dict(args))]
        )
        for n, (name, args) in enumerate(calls)
    ]


NAMED_NOTHING = TurnLookups(named=[], cards={}, looked_up=set(), searched=True)
NAMED_PARIS = TurnLookups(named=[{"key": "paris", "name": "Paris"}], cards={}, looked_up=set(), searched=True)


def test_the_loop_searches_passages_with_the_question_when_a_search_named_no_entity() -> None:
    turn = _turn(("hybrid_search", {"query": "Eiffel Tower"}))

    assert passage_search(turn, WITH_PASSAGES, "When was the Eiffel Tower finished?", NAMED_NOTHING) == {
        "query": "When was the Eiffel Tower finished?"
    }


def test_the_loop_searches_no_passages_when_the_graph_answered_or_they_were_searched_or_there_are_none() -> (
    None
):
    searched = _turn(("hybrid_search", {"query": "x"}), ("search_passages", {"query": "x"}))
    question = "When was the Eiffel Tower finished?"

    assert (
        passage_search(_turn(("hybrid_search", {"query": "Paris"})), WITH_PASSAGES, question, NAMED_PARIS)
        is None
    )
    assert passage_search(searched, WITH_PASSAGES, question, NAMED_NOTHING) is None
    assert (
        passage_search(_turn(("hybrid_search", {"query": "x"})), GRAPH_TOOLS, question, NAMED_NOTHING) is None
    )
    # A plan's path queries that found nothing leave the question to the documents, even with cards.
    assert passage_search([], WITH_PASSAGES, question, NAMED_PARIS, plan_found_nothing=True) == {
        "query": question
    }


LOUVRE = {**PASSAGE, "id": "louvre-passage", "text": "The Louvre is the most visited museum in France."}
QUESTION_TEXT = "When was the Eiffel Tower finished?"


def test_an_answer_that_cites_no_passage_is_given_the_passage_whose_words_it_uses() -> None:
    drawn = passages_drawn_on(
        "The Eiffel Tower was finished in 1889, for the World's Fair.", QUESTION_TEXT, [LOUVRE, PASSAGE]
    )

    assert drawn == [PASSAGE]
    assert sources_line(drawn) == f"\n\nSource: {LINK}"


@pytest.mark.parametrize(
    "answer",
    [
        f"It was finished in 1889 {LINK}.",
        "I could not find it in the knowledge graph.",
        "The Eiffel Tower was finished.",
    ],
    ids=["cites-itself", "not-found", "only-the-questions-words"],
)
def test_no_passage_is_added_to_an_answer_that_cites_one_found_nothing_or_says_nothing_new(
    answer: str,
) -> None:
    assert passages_drawn_on(answer, QUESTION_TEXT, [LOUVRE, PASSAGE]) == []


def test_the_passages_of_the_turn_are_those_the_passage_search_returned() -> None:
    turn = [
        *_turn(("search_passages", {"query": "x"})),
        ChatMessage(
            role="tool", tool_call_id="c0", content=json.dumps({"results": [PASSAGE, LOUVRE, PASSAGE]})
        ),
        *[
            ChatMessage(
                role="assistant", tool_calls=[ToolCallRequest(id="c1", name="hybrid_search", arguments={})]
            ),
            ChatMessage(role="tool", tool_call_id="c1", content=json.dumps({"results": [LOUVRE]})),
        ],
    ]

    assert turn_passages(turn, "search_passages") == [PASSAGE, LOUVRE]
    assert turn_passages(turn, None) == []


def test_the_targets_of_an_answers_entity_links_are_not_words_it_drew_from_a_passage() -> None:
    linked = {**LOUVRE, "text": "Each country entity of the graph, such as france, is listed here."}

    assert passages_drawn_on("It lies in [Paris](entity:country:france).", QUESTION_TEXT, [linked]) == []

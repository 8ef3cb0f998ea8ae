"""Sources of a plain answer that cites none (issue #48): the passages holding what it adds."""

from __future__ import annotations

from apps.chat.turns.attribution import answer_sources, sources_text

TOWER = {"id": "p1", "document_name": "paris-guide.md", "text": "The Eiffel Tower was finished in 1889."}
LOUVRE = {"id": "p2", "document_name": "louvre.md", "text": "The Louvre in Paris opened in 1793."}
BOTH = {"id": "p3", "document_name": "dates.md", "text": "Gustave Eiffel finished it in 1889."}


def test_an_answer_is_sourced_to_the_passages_holding_what_it_adds_to_the_question() -> None:
    sources = answer_sources(
        "It was finished in 1889 by Gustave Eiffel.", "When was the tower finished?", [TOWER, LOUVRE, BOTH]
    )

    assert sources == [BOTH]


def test_the_names_the_question_already_holds_source_nothing() -> None:
    assert answer_sources("The Louvre is in Paris.", "Where is the Louvre, in Paris?", [TOWER, LOUVRE]) == []


def test_an_answer_no_passage_holds_has_no_source() -> None:
    assert answer_sources("It opened in 1850 in Lyon.", "When did it open?", [TOWER, LOUVRE]) == []


def test_ties_are_cited_in_search_order_at_most_two() -> None:
    sources = answer_sources("In 1889.", "When was the tower finished?", [TOWER, BOTH, {**TOWER, "id": "p4"}])

    assert [p["id"] for p in sources] == ["p1", "p3"]
    assert sources_text(sources) == "\n\nSources: [paris-guide.md](passage:p1), [dates.md](passage:p3)"
    assert sources_text([]) == ""

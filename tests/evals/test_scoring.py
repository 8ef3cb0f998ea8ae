"""The scoring rules of apps.evals.scoring, kind by kind, and citation precision."""

import pytest

from apps.evals.questions import Question
from apps.evals.scoring import answer_score, citation_check, first_number, names, normalise, says_not_found


def q(kind, expected=(), count=None):
    return Question(
        id="t", set="t", kind=kind, template="capital", text="?", expected=tuple(expected), count=count
    )


def test_normalise_drops_accents_case_apostrophes_and_punctuation():
    assert normalise("  Lomé, CÔTE d’Ivoire! ") == "lome cote divoire"


def test_a_name_matches_only_as_whole_words():
    assert names("The capital is Niamey.", "Niamey")
    assert not names("It is Nigeria.", "Niger")
    assert names("Currency: US-Dollar", "US Dollar")


def test_one_hop_answer_scores_one_when_it_names_the_expected_entity():
    assert answer_score(q("one_hop", ["Paris"]), "The capital of France is [Paris](entity:abc).") == 1.0
    assert answer_score(q("one_hop", ["Paris"]), "The capital of France is Lyon.") == 0.0


def test_list_answer_gets_partial_credit_and_extra_names_cost_nothing():
    question = q("list", ["Brazil", "Argentina", "Chile", "Peru"])

    score = answer_score(question, "It borders Brazil, Argentina and Bolivia.")

    assert score == pytest.approx(0.5)


@pytest.mark.parametrize(
    "answer",
    [
        "Not found: there is no country named Logaria.",
        "No such country exists in the graph.",
        "Logaria does not exist in this knowledge graph.",
        "I couldn't find Logaria.",
        "The knowledge graph has nothing about Logaria.",
        "The currency used by Logaria is not listed in the results.",
    ],
)
def test_absent_answer_that_says_not_found_scores_one(answer):
    assert says_not_found(answer)
    assert answer_score(q("absent"), answer) == 1.0


def test_absent_answer_that_invents_a_capital_scores_zero():
    assert answer_score(q("absent"), "The capital of Logaria is Logburg.") == 0.0


def test_count_takes_the_first_number_in_digits_or_words():
    assert first_number("France borders eight countries, 2 of them ...") == 8
    assert answer_score(q("count", count=8), "France borders 8 countries.") == 1.0
    assert answer_score(q("count", count=8), "France borders 9 countries, not 8.") == 0.0


def test_count_ignores_the_digits_of_entity_ids_in_links():
    answer = "[France](entity:1234-5678) borders 8 countries."

    assert answer_score(q("count", count=8), answer) == 1.0


def test_citation_precision_counts_refs_that_exist_and_were_returned_in_the_turn():
    raw = "[A](entity:a) [B](entity:b) [C](entity:c) [A again](entity:a)"

    check = citation_check(raw_answer=raw, existing={"a", "b"}, returned={"a", "c"})

    assert (check.cited, check.valid) == (3, 1)
    assert check.precision == pytest.approx(1 / 3)


def test_an_answer_without_citations_has_no_precision():
    assert citation_check(raw_answer="Paris.", existing=set(), returned=set()).precision is None

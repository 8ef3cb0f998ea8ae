"""The scoring rules of apps.evals.scoring, kind by kind, and citation precision."""

import pytest

from apps.evals.questions import Question
from apps.evals.scoring import (
    answer_recall,
    answer_score,
    citation_check,
    first_number,
    names,
    normalise,
    says_not_found,
    yes_or_no,
)


def q(kind, expected=(), count=None, **more):
    return Question(
        id="t",
        set="t",
        kind=kind,
        template="capital",
        text="?",
        expected=tuple(expected),
        count=count,
        **more,
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


def test_an_intersection_that_names_the_neighbours_of_either_country_scores_zero():
    question = q("intersection", ["Togo", "Burkina Faso"], wrong=("Nigeria", "Niger", "Cote d'Ivoire"))

    right = answer_score(question, "Togo and Burkina Faso border both Benin and Ghana.")
    either = answer_score(question, "Togo, Burkina Faso, Nigeria, Niger and Côte d'Ivoire.")
    half = answer_score(question, "Togo, and also Niger.")

    assert right == 1.0
    assert either == 0.0
    assert half == pytest.approx(0.5 * (1 - 1 / 3))


def test_a_filtered_list_that_names_a_neighbour_with_another_currency_loses_credit():
    question = q("filtered", ["Nigeria"], wrong=("Togo", "Niger", "Burkina Faso"))

    assert answer_score(question, "Of Benin's neighbours, Nigeria uses the Naira.") == 1.0
    assert answer_score(question, "Nigeria and Togo.") == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("Yes, Ghana borders Togo.", "yes"),
        ("No. They share no border.", "no"),
        ("Ghana does not border Nigeria.", "no"),
        ("Ghana doesn't border Nigeria.", "no"),
        ("Ghana borders Togo; they are adjacent.", "yes"),
    ],
)
def test_a_yes_no_answer_is_its_first_word_or_else_whether_it_negates(answer, said):
    assert yes_or_no(answer) == said
    assert answer_score(q("yes_no", answer=said), answer) == 1.0
    assert answer_score(q("yes_no", answer="no" if said == "yes" else "yes"), answer) == 0.0


def test_a_comparison_scores_the_entity_the_answer_names_first():
    question = q("compare", ["Nigeria"], wrong=("Benin",))

    assert answer_score(question, "Nigeria is larger than Benin.") == 1.0
    assert answer_score(question, "Benin is smaller than Nigeria.") == 0.0


def test_a_per_item_answer_must_give_each_item_its_own_value():
    question = q(
        "per_item",
        ["Togo", "Burkina Faso"],
        pairs=(("Togo", ("CFA franc",)), ("Burkina Faso", ("CFA franc",))),
    )

    paired = answer_score(question, "Togo uses the CFA franc; Burkina Faso uses the CFA franc.")
    own_currency = answer_score(question, "Ghana borders Togo and Burkina Faso. Ghana uses the Cedi.")
    one = answer_score(question, "Togo (CFA franc), Burkina Faso.")

    assert paired == 1.0
    assert own_currency == 0.0
    assert one == 0.5


def test_a_per_item_name_inside_another_items_name_is_its_own_item():
    question = q(
        "per_item",
        ["Democratic Republic of the Congo", "Republic of the Congo"],
        pairs=(
            ("Democratic Republic of the Congo", ("Congolese Franc",)),
            ("Republic of the Congo", ("CFA Franc BEAC",)),
        ),
    )
    answer = (
        "- [Democratic Republic of the Congo](entity:1): [Congolese Franc](entity:2)\n"
        "- [Republic of the Congo](entity:3): [CFA Franc BEAC](entity:4)"
    )

    assert answer_score(question, answer) == 1.0
    assert answer_score(question, "Republic of the Congo: Congolese Franc.") == 0.0


def test_counts_over_an_inverse_relationship_score_as_counts_and_recall_is_the_share_named():
    assert answer_score(q("inverse_count", count=4), "4 countries use the CFA franc.") == 1.0
    assert answer_recall(q("list", ["Togo", "Ghana"]), "Togo.") == 0.5
    assert answer_recall(q("count", count=3), "3") is None

"""The docqa set's scores (issue #48): SQuAD's normalisation and token F1, contains-the-gold, recall@k."""

import pytest

from apps.evals.docqa import (
    DocQuestion,
    all_found,
    answer_f1,
    contains_gold,
    first_sentence,
    questions_to_answer,
    recall_at,
    squad_normalise,
    token_f1,
)
from apps.evals.docqa_run import invented_refs


def test_squad_normalisation_drops_case_punctuation_and_articles():
    text = "The  Father of Gian-Carlo, an Artist!"

    normalised = squad_normalise(text)

    assert normalised == "father of giancarlo artist"


def test_an_article_inside_a_word_is_kept():
    text = "Theatre and Anna"

    normalised = squad_normalise(text)

    assert normalised == "theatre and anna"


def test_token_f1_is_the_harmonic_mean_of_shared_tokens():
    prediction, gold = "Gian-Carlo Coppola was his father", "Gian-Carlo Coppola"

    f1 = token_f1(prediction, gold)

    # 2 of 5 predicted tokens are gold, both gold tokens are predicted: 2 * 0.4 * 1 / 1.4.
    assert f1 == pytest.approx(4 / 7)


def test_token_f1_of_nothing_shared_is_zero():
    f1 = token_f1("Rome", "Paris")

    assert f1 == 0.0


def test_answer_f1_reads_only_the_first_sentence_and_the_best_gold():
    answer = "[Gia Coppola](passage:abc) is his daughter. Her father is Gian-Carlo Coppola."

    f1 = answer_f1(answer, ["Gian-Carlo Coppola", "Gia Coppola"])

    assert first_sentence(answer) == "Gia Coppola is his daughter."
    assert f1 == pytest.approx(2 * (2 / 5) * 1 / (2 / 5 + 1))


def test_an_answer_containing_a_gold_answer_as_words_is_right_and_a_part_of_a_word_is_not():
    golds = ["William IV, Landgrave of Hesse-Kassel", "William IV"]

    right = contains_gold("His father-in-law was [William IV](passage:x), a landgrave.", golds)
    wrong = contains_gold("It was William IVa.", golds)

    assert right and not wrong


def test_a_yes_no_gold_needs_its_word_and_not_the_other():
    gold = ["yes"]

    plain_yes = contains_gold("Yes, both were born in Rome.", gold)
    both_words = contains_gold("No... yes?", gold)
    not_found = contains_gold("I could not find it in the knowledge graph.", gold)

    assert plain_yes and not both_words and not not_found


def test_recall_at_k_is_the_share_of_supporting_passages_in_the_first_k():
    ranked = ["p3", "p1", "p9", "p2", "p7", "p8"]

    assert recall_at(ranked, ["p1", "p2"], 2) == 0.5
    assert recall_at(ranked, ["p1", "p2"], 5) == 1.0
    assert recall_at(ranked, ["p1", "p8"], 5) == 0.5
    assert all_found(ranked, ["p1", "p2"], 5) and not all_found(ranked, ["p1", "p8"], 5)


def test_the_first_questions_of_each_dataset_are_answered_in_the_files_order():
    questions = [
        DocQuestion(id=f"{d}{i}", dataset=d, question="?", answers=("a",), supporting=(), type="t")
        for i in range(3)
        for d in ("musique", "2wikimultihopqa")
    ]

    chosen = questions_to_answer(questions, 2)
    every = questions_to_answer(questions, 0)

    assert [q.id for q in chosen] == ["2wikimultihopqa0", "2wikimultihopqa1", "musique0", "musique1"]
    assert len(every) == 6


def test_a_ref_the_citation_filter_did_not_keep_is_invented():
    raw = "[A](passage:p1) and [B](passage:p2), see (entity:e9) and [A again](passage:p1)."
    kept = [{"id": "p1", "key": "passage:p1", "type": "passage"}]

    invented = invented_refs(raw, kept)

    assert invented == 2

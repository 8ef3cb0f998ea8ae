"""A first name read alone is completed from the passages shown, in the question's context (issue #48)."""

from __future__ import annotations

from apps.agents.loop.full_names import full_name
from apps.agents.loop.passage_text import Reading

MARIANUS = {
    "id": "p1",
    "text": "Marianus V of Arborea was the Judge of Arborea. He was under the tutelage of his mother Eleanor.",
}
BRANCALEONE = {"id": "p2", "text": "Brancaleone Doria was the husband of Eleanor of Arborea."}
ROOSEVELT = {"id": "p3", "text": "Eleanor Roosevelt was the wife of Franklin D. Roosevelt."}
QUESTION = "Who is Marianus V Of Arborea's mother?"


def test_a_first_name_alone_is_completed_by_a_passages_name_whose_other_words_the_question_holds():
    got = full_name(QUESTION, Reading("Eleanor", MARIANUS), [MARIANUS, ROOSEVELT, BRANCALEONE])
    assert got == Reading("Eleanor of Arborea", MARIANUS)


def test_a_longer_name_out_of_the_questions_context_or_a_full_answer_is_left_alone():
    assert full_name(QUESTION, Reading("Eleanor", MARIANUS), [MARIANUS, ROOSEVELT]).answer == "Eleanor"
    full = Reading("Eleanor of Arborea", MARIANUS)
    assert full_name(QUESTION, full, [BRANCALEONE]) == full
    assert full_name(QUESTION, Reading("1387", MARIANUS), [BRANCALEONE]).answer == "1387"

"""Where the walk of ``search_passages`` starts (issue #48): the question's mentions but for a
parenthesised qualifier, and a lower-case run of its words that is an indexed name as it stands."""

from __future__ import annotations

import pytest

from apps.documents.models import Passage
from apps.documents.services import document_upload
from apps.documents.walk import passages_walk
from tests.factories import make_project

pytestmark = pytest.mark.django_db


def _upload(project, name, text):
    document_upload(project=project, name=name, data=text.encode())


def _walked_texts(project, question):
    texts = dict(Passage.objects.filter(project=project).values_list("id", "text"))
    walked = passages_walk(project_id=project.id, query=question) or []
    return [texts[w.passage_id] for w in walked], walked


def test_a_mention_inside_the_questions_parenthesised_qualifier_does_not_seed_the_walk():
    project = make_project()
    _upload(project, "film.txt", "Atomised (film): Atomised is a drama directed by Oskar Roehler.")
    _upload(project, "other.txt", "Vijay Bhatt: Film director Vijay Bhatt was born in Palitana.")

    texts, walked = _walked_texts(project, "Who directed the film Atomised (Film)?")

    assert all("Vijay Bhatt" not in text for text in texts)
    assert {m for w in walked for m in w.mentions} == {"Atomised"}


def test_a_lower_case_phrase_of_the_question_that_is_an_indexed_name_seeds_the_walk():
    project = make_project()
    terror = "Reign of Terror: The Reign of Terror was a period of the French Revolution."
    _upload(project, "terror.txt", terror)
    _upload(project, "other.txt", "Grace Hopper: Grace Hopper wrote the first compiler.")

    texts, walked = _walked_texts(project, "Who ruled France during the reign of terror?")

    assert texts[0] == terror
    assert walked[0].mentions == ("reign of terror",)


def test_a_name_of_the_question_read_on_with_the_words_written_after_it_seeds_as_that_longer_name():
    project = make_project()
    mountain = "Norris Mountain: Norris Mountain is located in the Lewis Range, in Montana."
    _upload(project, "mountain.txt", mountain)
    _upload(project, "director.txt", "Rufus Norris: Rufus Norris is an English theatre director.")
    _upload(project, "norris.txt", "Norris: Norris is a town in Tennessee.")

    texts, walked = _walked_texts(project, "Which range is Norris mountain part of?")

    assert texts[0] == mountain
    assert walked[0].mentions == ("Norris mountain",)
    assert all("Rufus Norris" not in text and "Tennessee" not in text for text in texts)

"""A family question's reading that names a relative of another degree is asked again (issue #48)."""

from __future__ import annotations

import asyncio

from apps.agents.loop.kinship import kin_checked, other_degree
from apps.agents.loop.passage_text import Reading

GIA = (
    'Gian-Carla "Gia" Coppola (born January 1, 1987) is an American film director. She is a '
    "granddaughter of Francis Ford Coppola, the daughter of Gian-Carlo Coppola and the niece of Roman Coppola."
)


def test_a_grandparent_read_for_a_father_is_of_another_degree():
    assert other_degree("Who is the father of Gia Coppola?", "Francis Ford Coppola", GIA)
    assert not other_degree("Who is the father of Gia Coppola?", "Gian-Carlo Coppola", GIA)


def test_a_question_asking_another_degree_or_no_family_relation_is_not_checked():
    assert not other_degree("Who is the grandfather of Gia Coppola?", "Francis Ford Coppola", GIA)
    assert not other_degree("Who is the uncle of Gia Coppola?", "Roman Coppola", GIA)
    assert not other_degree("Who directed Palo Alto?", "Francis Ford Coppola", GIA)


def test_an_answer_named_once_as_the_asked_relative_is_kept():
    text = "Her grandson Michael Beaumont succeeded her. Michael Beaumont, son of Francis, was born in 1927."
    assert not other_degree("Who is the son of Francis Beaumont?", "Michael Beaumont", text)
    assert other_degree("Who is the child of Sibyl Hathaway?", "Michael Beaumont", text.split(".")[0])


def _reader(answers):
    asked = []

    async def read(question, passages, excluded):
        asked.append(excluded)
        answer = answers[len(asked) - 1]
        return Reading(answer, passages[0] if answer else None)

    return read, asked


def test_the_reading_is_asked_again_without_a_relative_of_another_degree():
    passages = [{"id": "p1", "text": GIA}]
    read, asked = _reader(["Gian-Carlo Coppola"])
    first = Reading("Francis Ford Coppola", passages[0])

    got = asyncio.run(kin_checked(read, "Who is the father of Gia Coppola?", passages, first))

    assert got is not None and got.answer == "Gian-Carlo Coppola"
    assert asked == ["Francis Ford Coppola"]


def test_a_second_reading_of_another_degree_or_none_keeps_the_first():
    passages = [{"id": "p1", "text": GIA}]
    first = Reading("Francis Ford Coppola", passages[0])
    for again in ("Roman Coppola", ""):
        read, asked = _reader([again])
        got = asyncio.run(kin_checked(read, "Who is the father of Gia Coppola?", passages, first))
        assert got is first and asked == ["Francis Ford Coppola"]

"""The grammar of a question read against passages (``apps.agents.loop.questions``): the nested
description a hop resolves first, and the comparison of two named things. The questions are
written for these tests in several shapes, none taken from an eval sample."""

from __future__ import annotations

import pytest

from apps.agents.loop.compared import date_of, decided
from apps.agents.loop.comparisons import Comparison, comparison
from apps.agents.loop.questions import answer_kind, as_plain_relations, nested_description, resolved


@pytest.mark.parametrize(
    ("question", "description"),
    [
        ("Where was the author of novel The Glass Harbour born?", "the author of novel The Glass Harbour"),
        ("Who is the mother of the founder of Acme Rockets?", "the founder of Acme Rockets"),
        ("When did Queen Mira Of Tessaly's brother die?", "Queen Mira Of Tessaly's brother"),
        ("In which year did Lena Vogt's birth country join the union?", "Lena Vogt's birth country"),
        ("Who governs the province where Kallmora is located?", "the province where Kallmora is located"),
        (
            "What river runs through the city where Otto Brandl died?",
            "the city where Otto Brandl died",
        ),
        (
            "Which team signed the country where the town where Ivo Rusk was born is located?",
            "the town where Ivo Rusk was born",
        ),
        (
            "What language does the singer of song I Remember Rain speak?",
            "the singer of song I Remember Rain",
        ),
        (
            "Where did the director of film Night Shift (1999 Film) study?",
            "the director of film Night Shift (1999 Film)",
        ),
        (
            "When did the director of 45 Calibre Echo die?",
            "the director of 45 Calibre Echo",
        ),  # a number first
        (
            "Who is the spouse of the director of Jump for Glory?",
            "the director of Jump for Glory",
        ),  # joined title
        (
            "What piece by the composer of Bastien und Bastienne is famous?",
            "the composer of Bastien und Bastienne",
        ),
        (
            "When did the city where the next winter Olympics will be held fall?",
            "the city where the next winter Olympics will be held",
        ),
        ("Where is the district that Knott is part of located?", "the district that Knott is part of"),
        (
            "To which group of mountains does the range that Norris mountain is part of in Montana belong?",
            "the range that Norris mountain is part of",  # a lower-case noun of the name
        ),
        (
            "What is the area code for Cincinnati in the state where the Atwater Church is?",
            "the state where the Atwater Church is",  # the question's own subject last
        ),
        (
            "Who is the mother of the spouse of John Ernest, Duke Of Saxe-Eisenach?",
            "the spouse of John Ernest, Duke Of Saxe-Eisenach",  # a noble title is part of the name
        ),
        ("Who played the Silver Rain singer in the biopic?", "the Silver Rain singer"),  # a name and a role
        # descriptions that name nothing: "whose … is …", or one after a preposition to the end
        (
            "When did the province whose national dish is herring join the federation?",
            "the province whose national dish is herring",
        ),
        (
            "What is the highest peak of the island with the wettest climate?",
            "the island with the wettest climate",
        ),
        (
            "Who built the oldest bridge in the city where most of the country buys its tea?",
            "the city where most of the country buys its tea",
        ),
    ],
)
def test_the_innermost_description_of_a_nested_question_is_found(question: str, description: str) -> None:
    nested = nested_description(question)

    assert nested is not None and nested.text == description


@pytest.mark.parametrize(
    "question",
    [
        "Who is the father of Marta Kolb?",  # the description is the whole question's subject
        "What is the capital of Portugal?",
        "When was Marta Kolb born?",
        "Which book came out first, Blue Orchard or Night Ferry?",
        "how many moons does the planet have",
        "What is the name of the eastern cape of Norland?",  # "the name of" is the whole subject
        "What is the island with the wettest climate?",
        "When did the team that won the most titles win its first?",  # not after a preposition
        "What part of the region where sled races is held are the dunes?",  # two clauses
    ],
)
def test_a_question_with_nothing_nested_to_resolve_first_is_read_as_it_is(question: str) -> None:
    assert nested_description(question) is None


def test_a_resolved_hop_replaces_the_description_with_the_name_a_passage_gave() -> None:
    question = "Who is the child of the director of film An Evening Out?"
    nested = nested_description(question)

    assert nested is not None
    assert nested.sub_question() == "Who is the director of film An Evening Out?"
    assert resolved(question, nested, "Vera Lind") == "Who is the child of Vera Lind?"


def test_a_description_of_a_thing_is_asked_what_and_of_a_person_who() -> None:
    place = nested_description("Who was the mayor of the capital of Rivendia?")
    spouses = nested_description("Where was the wife of the founder of Acme Corp born?")

    assert place is not None and place.sub_question() == "What is the capital of Rivendia?"
    assert spouses is not None and spouses.sub_question() == "Who is the founder of Acme Corp?"
    country = nested_description("Who was the first president of Damerjog's country?")
    assert country is not None and (country.head(), country.sub_question()) == (
        "country",
        "What is Damerjog's country?",
    )


@pytest.mark.parametrize(
    ("question", "things", "asks", "decision"),
    [
        (
            "Who was born first, Marta Kolb or Ivo Rusk?",
            ("Marta Kolb", "Ivo Rusk"),
            ("When was Marta Kolb born?", "When was Ivo Rusk born?"),
            "earlier",
        ),
        (
            "Was Otto Brandl or Lena Vogt born later?",
            ("Otto Brandl", "Lena Vogt"),
            ("When was Otto Brandl born?", "When was Lena Vogt born?"),
            "later",
        ),
        (
            "Which film came out first, The Glass Harbour or Night Ferry?",
            ("The Glass Harbour", "Night Ferry"),
            ("When did The Glass Harbour come out?", "When did Night Ferry come out?"),
            "earlier",
        ),
        (
            "Which band has the singer who died later, Red Meridian or The Tin Owls?",
            ("Red Meridian", "The Tin Owls"),
            ("When did the singer of Red Meridian die?", "When did the singer of The Tin Owls die?"),
            "later",
        ),
        (
            "Were Marta Kolb and Ivo Rusk born in the same place?",
            ("Marta Kolb", "Ivo Rusk"),
            ("Where was Marta Kolb born?", "Where was Ivo Rusk born?"),
            "same",
        ),
        (
            "Are the novels Blue Orchard and Night Ferry from the same country?",
            ("Blue Orchard", "Night Ferry"),
            ("Which country is Blue Orchard from?", "Which country is Night Ferry from?"),
            "same",
        ),
    ],
)
def test_a_comparison_asks_each_named_thing_its_own_question(
    question: str, things: tuple[str, str], asks: tuple[str, str], decision: str
) -> None:
    found = comparison(question)

    assert found == Comparison(things=things, asks=asks, decision=decision)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "question",
    ["Who wrote Blue Orchard and when?", "What do Marta Kolb and Ivo Rusk sell?", "Who is Marta Kolb?"],
)
def test_a_question_that_compares_no_two_named_things_is_no_comparison(question: str) -> None:
    assert comparison(question) is None


def test_dates_decide_which_came_earlier_or_later_whatever_their_format() -> None:
    born = comparison("Who was born first, Marta Kolb or Ivo Rusk?")
    died = comparison("Who died later, Marta Kolb or Ivo Rusk?")
    assert born is not None and died is not None

    assert decided(born, ("30 October 1997", "November 19, 1979")) == "Ivo Rusk"
    assert decided(born, ("1850", "March 1850")) is None  # no later than a bare year: not decided
    assert decided(died, ("in 480 BC", "in 1020")) == "Ivo Rusk"
    assert decided(born, ("somewhere in spring", "1979")) is None
    assert date_of("born 3 March 1936 in Paris") == (1936, 3, 3)


def test_same_place_is_yes_for_one_name_inside_the_other_and_no_for_different_places() -> None:
    same = comparison("Were Marta Kolb and Ivo Rusk born in the same place?")
    assert same is not None

    assert decided(same, ("Rome", "Rome, Italy")) == "yes"
    assert decided(same, ("Italy", "Italian")) == "yes"
    assert decided(same, ("Lisbon", "Oslo")) == "no"


@pytest.mark.parametrize(
    ("question", "plain"),
    [
        ("Who is the father-in-law of Otto Brandl?", "Who is the father of the spouse of Otto Brandl?"),
        ("Who is Lena Vogt's stepmother?", "Who is the wife of the father of Lena Vogt?"),
        ("Who was Marta Kolb's paternal grandfather?", "Who was the father of the father of Marta Kolb?"),
        ("Who is the mother of Ivo Rusk?", "Who is the mother of Ivo Rusk?"),
    ],
)
def test_a_kinship_word_that_is_two_relations_is_asked_as_the_two_a_passage_writes(
    question: str, plain: str
) -> None:
    asked = as_plain_relations(question)

    assert asked == plain
    assert plain == question or nested_description(asked) is not None


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("What is the place of birth of Marta Kolb?", "a place"),
        ("What is the birthplace of Albert, King of Sweden?", "a place"),
        ("In which city did Otto Brandl die?", "a place"),
        ("Which country is Night Ferry from?", "a place"),
        ("When was Blue Orchard published?", "a date"),
        ("What is the date of death of Ivo Rusk?", "a date"),
        ("Who is the child of Lena Vogt?", "a name"),
        ("How many albums did Red Meridian release?", "a number"),
        ("What nationality is Marta Kolb?", None),
        ("What is the population of the state where Ivo Rusk lives?", "a number"),
    ],
)
def test_the_kind_of_answer_is_read_from_the_question_words(question: str, kind: str | None) -> None:
    assert answer_kind(question) == kind


@pytest.mark.parametrize(
    ("question", "things"),
    [
        (
            "Which film has the director who died later, Love, Honor And Oh-Baby! or I Cover The Underworld?",
            ("Love, Honor And Oh-Baby!", "I Cover The Underworld"),
        ),
        (
            "Which film came out first, The First Day Of Freedom or Malabimba – The Malicious Whore?",
            ("The First Day Of Freedom", "Malabimba – The Malicious Whore"),
        ),
        (
            "Are Christopher Newton (Criminal) and Frances M. Vega of the same nationality?",
            ("Christopher Newton (Criminal)", "Frances M. Vega"),
        ),
        (
            "Are the movies Wizards Of The Lost Kingdom and Final Exam (1981 Film), from the same country?",
            ("Wizards Of The Lost Kingdom", "Final Exam (1981 Film)"),
        ),
    ],
)
def test_the_things_compared_are_whole_titles(question: str, things: tuple[str, str]) -> None:
    compared = comparison(question)

    assert compared is not None and compared.things == things

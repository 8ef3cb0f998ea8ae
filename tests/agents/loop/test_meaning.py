"""Question words matched to relationship names by meaning, with the embedded e5 model (issue #25)."""

from __future__ import annotations

from typing import Any

from apps.agents.loop import candidates as paths
from apps.agents.loop import meaning, word_relationships
from apps.agents.loop.plan_graph import Mention, Relationship

WORLD = [
    Relationship(rel, source, target)
    for rel, source, target in (
        ("BORDERS", "Country", "Country"),
        ("CAPITAL_OF", "City", "Country"),
        ("LOCATED_IN", "City", "Country"),
        ("USES_CURRENCY", "Country", "Currency"),
        ("SPEAKS", "Country", "Language"),
        ("IN_CONTINENT", "Country", "Continent"),
    )
]
FILMS = [
    Relationship(rel, "Movie", target)
    for rel, target in (
        ("DIRECTED_BY", "Person"),
        ("WRITTEN_BY", "Person"),
        ("STARRED_ACTORS", "Person"),
        ("RELEASE_YEAR", "Year"),
        ("IN_LANGUAGE", "Language"),
        ("HAS_GENRE", "Genre"),
        ("HAS_TAGS", "Tag"),
        ("HAS_IMDB_RATING", "Rating"),
        ("HAS_IMDB_VOTES", "Votes"),
    )
]


def test_a_question_word_that_names_a_relationship_by_meaning_picks_that_relationship():
    # No relationship's name holds "situated" or "money" (the lexical match finds nothing).
    assert word_relationships.word_hints("in which country is Kumasi situated", WORLD)[1] == []
    assert meaning.relationship_by_meaning("situated", WORLD) == "LOCATED_IN"
    assert word_relationships.word_path("in which country is Kumasi situated", "Kumasi", WORLD) == [
        "LOCATED_IN"
    ]
    assert word_relationships.word_path("what money does Senegal have", "Senegal", WORLD) == ["USES_CURRENCY"]


def test_a_relationship_a_word_names_by_its_letters_is_not_named_again_by_meaning():
    # "use" names USES_CURRENCY; "money" means it too, but is no second hop there and back.
    assert meaning.relationship_by_meaning("money", WORLD) == "USES_CURRENCY"
    assert word_relationships.word_path("what money do they use in senegal", "senegal", WORLD) == [
        "USES_CURRENCY"
    ]


def test_a_word_near_no_relationship_or_near_several_names_none():
    # Function words, the graph's type words and words near nothing in particular name nothing.
    assert word_relationships.word_path("what is Senegal", "Senegal", WORLD) == []
    assert word_relationships.word_path("tell me about Senegal", "Senegal", WORLD) == []
    assert word_relationships.word_path("which countries is Senegal near", "Senegal", WORLD) == []
    # Measured on MetaQA: e5 puts "describe" nearest WRITTEN_BY (0.41 centred), above the threshold's
    # reach only when it is lowered past words that mean something else; it names nothing here.
    assert meaning.relationship_by_meaning("describe", FILMS) is None
    assert word_relationships.word_path("describe Dune", "Dune", FILMS) == []


def test_a_schema_too_small_to_centre_matches_nothing_by_meaning():
    small = WORLD[: meaning.MIN_RELATIONSHIPS - 1]
    assert meaning.similarities("money", small) == {}
    assert meaning.relationship_by_meaning("situated", small) is None


def test_the_similarities_are_the_same_every_time():
    first = meaning.similarities("author", FILMS)
    assert set(first) == {r.type for r in FILMS}
    assert meaning.similarities("author", FILMS) == first
    assert meaning.similarities("author", list(reversed(FILMS))) == first


def test_paths_that_tie_are_tried_first_along_the_relationship_the_words_lean_to():
    dune = Mention("Dune", "Movie", ("movie:dune",))
    plan = {"start": "Dune", "asks_for": "Person", "relationships": [], "and": None, "answer": "list"}
    # No word names a relationship by its letters: DIRECTED_BY, STARRED_ACTORS and WRITTEN_BY reach
    # a Person equally well; "author" leans to WRITTEN_BY, which is queried first.
    leaning = word_relationships.word_leanings("who is the author of Dune", "Dune", FILMS)
    assert max(leaning, key=lambda rel: leaning[rel]) == "WRITTEN_BY"
    candidates = paths.plan_candidates(plan, [dune], FILMS, question="who is the author of Dune")
    first = [c["hops"][0]["relationship"] for c in candidates]
    assert first[0] == "WRITTEN_BY"
    assert sorted(first) == ["DIRECTED_BY", "STARRED_ACTORS", "WRITTEN_BY"]
    # Without the question the tie keeps the order of the typed paths (DIRECTED_BY first).
    plain = paths.plan_candidates(plan, [dune], FILMS)
    assert plain[0]["hops"][0]["relationship"] == "DIRECTED_BY"


# A few of MetaQA's values, each relationship's most reached first (``relationship_value_names``).
FILM_VALUES = {
    "DIRECTED_BY": (
        "John Ford",
        "Alfred Hitchcock",
        "Woody Allen",
        "Michael Curtiz",
        "George Cukor",
        "Clint Eastwood",
        "Sidney Lumet",
        "Ingmar Bergman",
        "Howard Hawks",
        "Robert Altman",
        "Frank Capra",
        "Martin Scorsese",
    ),
    "HAS_GENRE": (
        "Drama",
        "Comedy",
        "Horror",
        "Action",
        "Thriller",
        "Crime",
        "War",
        "Adventure",
        "Documentary",
        "Western",
        "Musical",
        "Fantasy",
    ),
    "HAS_IMDB_RATING": ("good", "bad", "fantastic"),
    "HAS_IMDB_VOTES": ("famous", "unknown", "well known"),
    "HAS_TAGS": (
        "bd-r",
        "comedy",
        "r",
        "drama",
        "action",
        "horror",
        "national film registry",
        "war",
        "remake",
        "thriller",
        "musical",
        "fantasy",
    ),
    "IN_LANGUAGE": (
        "French",
        "English",
        "Italian",
        "Japanese",
        "German",
        "Spanish",
        "Swedish",
        "Russian",
        "Finnish",
        "Hindi",
        "Danish",
        "Norwegian",
    ),
    "RELEASE_YEAR": (
        "2009",
        "2008",
        "2007",
        "2011",
        "2012",
        "2013",
        "2006",
        "2010",
        "2005",
        "2004",
        "2001",
        "2003",
    ),
    "STARRED_ACTORS": (
        "John Wayne",
        "Robert De Niro",
        "Michael Caine",
        "Cary Grant",
        "James Stewart",
        "Gene Hackman",
        "Humphrey Bogart",
        "Burt Lancaster",
        "Gary Cooper",
        "Barbara Stanwyck",
        "Bruce Willis",
        "Bette Davis",
    ),
    "WRITTEN_BY": (
        "Woody Allen",
        "Stephen King",
        "Ingmar Bergman",
        "Billy Wilder",
        "Werner Herzog",
        "William Shakespeare",
        "Luc Besson",
        "Neil Simon",
        "Akira Kurosawa",
        "John Hughes",
        "David Mamet",
        "Blake Edwards",
    ),
}


def test_a_question_whose_words_name_no_relationship_names_the_one_whose_values_it_means():
    # "famous" is none of the relationships' names; it is what HAS_IMDB_VOTES reaches ("famous",
    # "well known"); "author" is near WRITTEN_BY's name and its writers.
    leaving = [r.type for r in FILMS]
    assert meaning.relationship_by_values("famous film", FILM_VALUES, FILMS, leaving) == "HAS_IMDB_VOTES"
    assert meaning.relationship_by_values("author", FILM_VALUES, FILMS, leaving) == "WRITTEN_BY"
    # Only among the relationships offered: without HAS_IMDB_VOTES, "famous" names none clearly.
    others = [r for r in leaving if r != "HAS_IMDB_VOTES"]
    assert meaning.relationship_by_values("famous film", FILM_VALUES, FILMS, others) is None


def test_words_near_no_relationships_values_name_none():
    leaving = [r.type for r in FILMS]
    assert meaning.relationship_by_values("tell me about", FILM_VALUES, FILMS, leaving) is None
    assert meaning.relationship_by_values("information", FILM_VALUES, FILMS, leaving) is None
    assert meaning.relationship_by_values("", FILM_VALUES, FILMS, leaving) is None
    # Too few relationships to centre: nothing is named by its values.
    small = {k: FILM_VALUES[k] for k in list(FILM_VALUES)[: meaning.MIN_RELATIONSHIPS - 1]}
    assert meaning.value_similarities("famous film", small, FILMS) == {}


def test_a_value_two_relationships_reach_tells_neither_and_is_left_out():
    distinct = meaning._distinct(
        {"HAS_GENRE": ("Drama", "Sport"), "HAS_TAGS": ("drama", "remake"), "X": ("drama",)}
    )
    assert distinct == {"HAS_GENRE": ["Sport"], "HAS_TAGS": ["remake"], "X": ["drama"]}


MASSACRE = Mention("Massacre at Central High", "Movie", ("movie:massacre",))


def massacre_plan(asks_for: str, *relationships: str) -> dict[str, Any]:
    """A list plan the model wrote, starting at MASSACRE."""
    return {
        "start": MASSACRE.name,
        "asks_for": asks_for,
        "relationships": list(relationships),
        "and": None,
        "answer": "list",
    }


def hops_chosen(written: dict[str, Any], question: str, **kwargs: Any) -> list[str]:
    """The relationships of the one typed path ``plan_candidates`` makes of ``written``."""
    (arguments,) = paths.plan_candidates(written, [MASSACRE], FILMS, question=question, **kwargs)
    return [h["relationship"] for h in arguments["hops"]]


def test_a_plan_for_a_question_whose_words_name_no_relationship_follows_the_one_its_values_name():
    question = "how famous of a film was Massacre at Central High"
    # Measured: the model planned "how famous" as the rating.
    written = massacre_plan("Rating", "HAS_IMDB_RATING")

    assert hops_chosen(written, question, values=FILM_VALUES) == ["HAS_IMDB_VOTES"]
    assert hops_chosen(written, question) == ["HAS_IMDB_RATING"]


def test_the_values_never_change_a_path_the_words_name_or_a_plan_of_several_relationships():
    # "directed" names DIRECTED_BY by its letters: the values are not asked.
    directed = massacre_plan("Person", "DIRECTED_BY")
    question = "who directed Massacre at Central High, the famous one"
    assert hops_chosen(directed, question, values=FILM_VALUES) == ["DIRECTED_BY"]
    # A plan of two relationships is a chain the values of one cannot say.
    chain = massacre_plan("Movie", "DIRECTED_BY", "DIRECTED_BY")
    question = "how famous of a film was Massacre at Central High"
    assert hops_chosen(chain, question, values=FILM_VALUES) == ["DIRECTED_BY", "DIRECTED_BY"]


def test_a_question_that_does_not_write_the_starts_name_gets_no_relationship_by_values():
    dollar = Mention("$", "Movie", ("movie:dollar",))
    # MetaQA has a film called "$": "who acted in $" has no word for it, so no words around it.
    assert word_relationships.value_path("who acted in $", dollar, FILM_VALUES, FILMS) is None

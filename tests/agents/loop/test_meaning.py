"""Question words matched to relationship names by meaning, with the embedded e5 model (issue #25)."""

from __future__ import annotations

from apps.agents.loop import meaning
from apps.agents.loop import plan as plan_step
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
    assert plan_step.word_hints("in which country is Kumasi situated", WORLD)[1] == []
    assert meaning.relationship_by_meaning("situated", WORLD) == "LOCATED_IN"
    assert plan_step.word_path("in which country is Kumasi situated", "Kumasi", WORLD) == ["LOCATED_IN"]
    assert plan_step.word_path("what money does Senegal have", "Senegal", WORLD) == ["USES_CURRENCY"]


def test_a_relationship_a_word_names_by_its_letters_is_not_named_again_by_meaning():
    # "use" names USES_CURRENCY; "money" means it too, but is no second hop there and back.
    assert meaning.relationship_by_meaning("money", WORLD) == "USES_CURRENCY"
    assert plan_step.word_path("what money do they use in senegal", "senegal", WORLD) == ["USES_CURRENCY"]


def test_a_word_near_no_relationship_or_near_several_names_none():
    # Function words, the graph's type words and words near nothing in particular name nothing.
    assert plan_step.word_path("what is Senegal", "Senegal", WORLD) == []
    assert plan_step.word_path("tell me about Senegal", "Senegal", WORLD) == []
    assert plan_step.word_path("which countries is Senegal near", "Senegal", WORLD) == []
    # Measured on MetaQA: e5 puts "describe" nearest WRITTEN_BY (0.41 centred), above the threshold's
    # reach only when it is lowered past words that mean something else; it names nothing here.
    assert meaning.relationship_by_meaning("describe", FILMS) is None
    assert plan_step.word_path("describe Dune", "Dune", FILMS) == []


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
    leaning = plan_step.word_leanings("who is the author of Dune", "Dune", FILMS)
    assert max(leaning, key=lambda rel: leaning[rel]) == "WRITTEN_BY"
    candidates = plan_step.plan_candidates(plan, [dune], FILMS, question="who is the author of Dune")
    first = [c["hops"][0]["relationship"] for c in candidates]
    assert first[0] == "WRITTEN_BY"
    assert sorted(first) == ["DIRECTED_BY", "STARRED_ACTORS", "WRITTEN_BY"]
    # Without the question the tie keeps the order of the typed paths (DIRECTED_BY first).
    plain = plan_step.plan_candidates(plan, [dune], FILMS)
    assert plain[0]["hops"][0]["relationship"] == "DIRECTED_BY"

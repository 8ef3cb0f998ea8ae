"""Paths to candidates: a plan turned into the query_paths calls of the typed paths that fit it
best, a second named entity as a constraint, and the chain a question's words name."""

from __future__ import annotations

import pytest

from apps.agents.loop import candidates as paths
from apps.agents.loop import plan_graph, plan_turn, word_relationships
from tests.agents.loop.plan_support import BENIN, NAIRA, RELATIONSHIPS, TOGO, entity, plan


def test_a_yes_no_asks_whether_the_second_entity_itself_is_reached_when_it_is_of_that_type():
    written = plan(answer="yes/no", **{"and": {"start": "Togo", "relationships": ["BORDERS"]}})
    via_currency = plan(
        answer="yes/no",
        asks_for="Currency",
        relationships=["BORDERS", "USES_CURRENCY"],
        **{"and": {"start": "Naira", "relationships": ["USES_CURRENCY"]}},
    )

    (itself,) = paths.plan_candidates(written, [BENIN, TOGO], RELATIONSHIPS)
    (currency,) = paths.plan_candidates(via_currency, [BENIN, NAIRA], RELATIONSHIPS)

    # "Does Benin border Togo": is Togo among Benin's neighbours (not: does a neighbour border Togo).
    assert itself["hops"][0]["in_path"] == {"start": [{"key": "country:TG"}], "hops": []}
    assert currency["hops"][-1]["in_path"] == {"start": [{"key": "currency:NGN"}], "hops": []}


def test_another_named_entity_the_plan_left_out_constrains_the_answers_first():
    south_africa = plan_graph.Mention("South Africa", "Country", ("country:ZA",))
    polokwane = plan_graph.Mention("Polokwane", "City", ("city:polokwane",))
    written = plan(start="Polokwane", asks_for="Country", relationships=["CAPITAL_OF"], answer="yes/no")

    (yes_no,) = paths.plan_candidates(written, [south_africa, polokwane], RELATIONSHIPS)
    constrained, plain = paths.plan_candidates(
        plan(), [BENIN, NAIRA], RELATIONSHIPS, hinted=["BORDERS", "USES_CURRENCY"]
    )
    # Part of the start's own name is not another entity; "each" keeps its plan.
    guinea = plan_graph.Mention("Guinea", "Country", ("country:GN",))
    (inside,) = paths.plan_candidates(
        plan(start="Guinea-Bissau"),
        [plan_graph.Mention("Guinea-Bissau", "Country", ("country:GW",)), guinea],
        RELATIONSHIPS,
        hinted=["BORDERS"],
    )

    assert yes_no["result"] == "exists"
    assert yes_no["hops"][0]["in_path"] == {"start": [{"key": "country:ZA"}], "hops": []}
    assert constrained["hops"][0]["in_path"]["start"] == [{"key": "currency:NGN"}]
    assert "in_path" not in plain["hops"][0]
    assert "in_path" not in inside["hops"][0]
    assert paths.implied_and(plan(answer="each"), [BENIN, NAIRA], ["BORDERS"]) is None
    assert paths.implied_and(plan(), [BENIN], ["BORDERS"]) is None


def test_the_typed_path_that_fits_the_relationships_mentioned_and_the_type_asked_for_is_chosen():
    def best(start: str, mentioned: list[str], asks_for: str) -> list[str]:
        return [p.text for p in paths.best_paths(start, mentioned, asks_for, RELATIONSHIPS)]

    assert best("City", ["CAPITAL_OF", "LOCATED_IN"], "City") == [
        "City -CAPITAL_OF-> Country <-LOCATED_IN- City",
        "City -LOCATED_IN-> Country <-CAPITAL_OF- City",
    ]
    # Named once, but the type asked for is two hops away: there and back.
    assert best("Country", ["USES_CURRENCY"], "Country") == [
        "Country -USES_CURRENCY-> Currency <-USES_CURRENCY- Country"
    ]
    # Nothing mentioned beyond the first hop, yet the type asked for is a hop further.
    assert best("City", ["LOCATED_IN"], "Currency") == [
        "City -LOCATED_IN-> Country -USES_CURRENCY-> Currency"
    ]


# A film graph shaped like MetaQA's, for the chains the question's words name.
FILMS = [
    plan_graph.Relationship(rel, "Movie", target)
    for rel, target in (
        ("DIRECTED_BY", "Person"),
        ("WRITTEN_BY", "Person"),
        ("STARRED_ACTORS", "Person"),
        ("RELEASE_YEAR", "Year"),
        ("IN_LANGUAGE", "Language"),
        ("HAS_GENRE", "Genre"),
    )
]
D, W, S, Y, L, G = "DIRECTED_BY", "WRITTEN_BY", "STARRED_ACTORS", "RELEASE_YEAR", "IN_LANGUAGE", "HAS_GENRE"


@pytest.mark.parametrize(
    ("question", "start", "chain"),
    [
        # Outward from the name, whichever side the words are on.
        ("who directed the films starred by the actors in Hell Up in Harlem", "Hell Up in Harlem", [S, S, D]),
        ("who acted in the movies written by Ann Lee", "Ann Lee", [W, S]),
        ("what genres are the films starred by The Long Night actors", "The Long Night", [S, S, G]),
        # The main clause after the name comes last.
        (
            "the movies that share actors with the movie Zombieland are directed by who",
            "Zombieland",
            [S, S, D],
        ),
        ("the actor of Dune also starred in which films", "Dune", [S, S]),
        # A noun for who does it names the person between two hops.
        ("who directed movies for the writer of Dune", "Dune", [W, W, D]),
        (
            "who are the writers that the actors in their films also appear in the film Dune",
            "Dune",
            [S, S, W],
        ),
        # Shared, together, co-: there and back.
        ("who co-starred with Ann Lee", "Ann Lee", [S, S]),
        ("who wrote films together with Ann Lee", "Ann Lee", [W, W]),
        ("which screenwriters co-wrote films with Ann Lee", "Ann Lee", [W, W]),
        # What the start is ("the director X") is no hop, but the way out of it.
        ("the director Ann Lee co-directed movies with who", "Ann Lee", [D, D]),
        ("who starred movies for the director Ann Lee", "Ann Lee", [D, S]),
        # A word for the answers' type beside a word for its relationship is no second hop.
        ("what year was the film Dune released", "Dune", [Y]),
        ("what were the release years of the movies directed by Ann Lee", "Ann Lee", [D, Y]),
        ("what are the languages spoken in the films directed by Ann Lee", "Ann Lee", [D, L]),
        # Nothing to say: the name is not in the question, or no word names a relationship.
        ("and its director?", "Dune", []),
        ("tell me about Dune", "Dune", []),
    ],
)
def test_the_chain_a_question_names_grows_outward_from_its_start_with_repeats(question, start, chain):
    assert word_relationships.word_path(question, start, FILMS) == chain


def test_a_list_from_one_entity_follows_the_chain_its_words_name_where_the_plan_says_otherwise():
    dune = plan_graph.Mention("Zombieland", "Movie", ("movie:zombieland",))
    lee = plan_graph.Mention("Ann Lee", "Person", ("person:ann-lee",))
    # The model named the chain's relationships in the question's order, once each.
    written = {
        "start": "Zombieland",
        "asks_for": "Person",
        "relationships": [D, S],
        "and": None,
        "answer": "list",
    }
    question = "who directed movies that share actors with the movie Zombieland"
    (best, *_) = paths.plan_candidates(written, [dune], FILMS, question=question)
    assert [(h["relationship"], h["direction"]) for h in best["hops"]] == [(S, "out"), (S, "in"), (D, "out")]
    # "when" asks for the graph's time type, whatever the plan said it asks for.
    when = {
        "start": "Ann Lee",
        "asks_for": "Movie",
        "relationships": [D, Y, Y],
        "and": None,
        "answer": "list",
    }
    (best, *_) = paths.plan_candidates(
        when, [lee], FILMS, question="when were the films directed by Ann Lee released"
    )
    assert [(h["relationship"], h["direction"]) for h in best["hops"]] == [(D, "in"), (Y, "out")]
    # Without the question, the plan's own list decides as before.
    (before, *_) = paths.plan_candidates(when, [lee], FILMS)
    assert [h["relationship"] for h in before["hops"]] == [D, Y, Y]


def test_a_second_entity_of_another_type_than_asked_for_is_reached_by_the_plans_relationship_to_it():
    # "Which of the countries that border Benin use the Naira?", planned with the Naira alone on
    # its side: the answers are countries that use it, not the Naira itself.
    written = plan(
        relationships=["BORDERS", "USES_CURRENCY"], **{"and": {"start": "Naira", "relationships": []}}
    )
    intended = plan(**{"and": {"start": "Naira", "relationships": ["USES_CURRENCY"]}})

    candidates = paths.plan_candidates(written, [BENIN, NAIRA], RELATIONSHIPS)

    assert candidates == paths.plan_candidates(intended, [BENIN, NAIRA], RELATIONSHIPS)
    # A yes/no about the entity itself keeps it alone ("does Benin border Togo?").
    (yes_no,) = paths.plan_candidates(
        plan(**{"and": {"start": "Togo", "relationships": []}}, answer="yes/no"), [BENIN, TOGO], RELATIONSHIPS
    )
    assert yes_no["hops"][0]["in_path"] == {"start": [{"key": "country:TG"}], "hops": []}


def test_a_plan_becomes_path_queries_the_best_fitting_paths_first():
    named = [BENIN, NAIRA, TOGO]

    (listed,) = paths.plan_candidates(plan(), named, RELATIONSHIPS)
    (filtered,) = paths.plan_candidates(
        plan(**{"and": {"start": "Naira", "relationships": ["USES_CURRENCY"]}}), named, RELATIONSHIPS
    )
    (yes_no,) = paths.plan_candidates(
        plan(**{"and": {"start": "Togo", "relationships": []}}, answer="yes/no"), named, RELATIONSHIPS
    )
    (each,) = paths.plan_candidates(
        plan(asks_for="Currency", relationships=["BORDERS", "USES_CURRENCY"], answer="each"),
        named,
        RELATIONSHIPS,
    )
    (larger,) = paths.plan_candidates(
        plan(
            relationships=[],
            **{"and": {"start": "Togo", "relationships": []}},
            answer="largest",
            property="area_km2",
        ),
        named,
        RELATIONSHIPS,
    )

    assert listed == {
        "start": [{"key": "country:BJ"}],
        "hops": [{"relationship": "BORDERS", "direction": "both", "type": "Country"}],
        "limit": 500,
        "result": "entities",
    }
    assert filtered["hops"][0]["in_path"] == {
        "start": [{"key": "currency:NGN"}],
        "hops": [{"relationship": "USES_CURRENCY", "direction": "in", "type": "Country"}],
    }
    assert yes_no["result"] == "exists"
    assert yes_no["hops"][0]["in_path"] == {"start": [{"key": "country:TG"}], "hops": []}
    assert (each["result"], len(each["hops"])) == ("group", 2)
    assert larger == {
        "start": [{"key": "country:BJ"}, {"key": "country:TG"}],
        "hops": [],
        "limit": 500,
        "result": "max",
        "property": "area_km2",
    }
    assert paths.plan_candidates(plan(start="Ghana"), named, RELATIONSHIPS) == []


def test_a_relationship_the_second_entity_follows_is_not_followed_again_on_the_main_path():
    named = [NAIRA, BENIN]
    written = plan(
        start="Naira",
        relationships=["USES_CURRENCY", "BORDERS"],
        **{"and": {"start": "Benin", "relationships": ["BORDERS"]}},
    )

    (filtered,) = paths.plan_candidates(written, named, RELATIONSHIPS)

    assert filtered["start"] == [{"key": "currency:NGN"}]
    assert [h["relationship"] for h in filtered["hops"]] == ["USES_CURRENCY"]
    assert filtered["hops"][0]["in_path"]["start"] == [{"key": "country:BJ"}]
    assert [h["relationship"] for h in filtered["hops"][0]["in_path"]["hops"]] == ["BORDERS"]


def test_a_plan_naming_the_same_relationships_on_both_sides_gives_each_side_the_one_that_reaches_the_type_asked_for():
    both = ["BORDERS", "USES_CURRENCY"]
    written = plan(start="Naira", relationships=both, **{"and": {"start": "Benin", "relationships": both}})

    (filtered,) = paths.plan_candidates(written, [NAIRA, BENIN], RELATIONSHIPS)

    assert filtered["start"] == [{"key": "currency:NGN"}]
    assert [h["relationship"] for h in filtered["hops"]] == ["USES_CURRENCY"]
    assert filtered["hops"][0]["in_path"]["start"] == [{"key": "country:BJ"}]
    assert [h["relationship"] for h in filtered["hops"][0]["in_path"]["hops"]] == ["BORDERS"]
    # The same when the plan asks for the start's own type.
    own = paths.plan_candidates({**written, "asks_for": "Currency"}, [NAIRA, BENIN], RELATIONSHIPS)
    assert [h["relationship"] for h in own[0]["hops"]] == ["USES_CURRENCY"]
    assert [h["relationship"] for h in own[0]["hops"][0]["in_path"]["hops"]] == ["BORDERS"]
    # The same when the plan left the second entity out and the question's words name both.
    question = "Which neighbours of Benin use the Naira?"
    implied, *_ = paths.plan_candidates(
        plan(relationships=both), [BENIN, NAIRA], RELATIONSHIPS, hinted=both, question=question
    )
    assert implied["start"] == [{"key": "country:BJ"}]
    assert [h["relationship"] for h in implied["hops"]] == ["BORDERS"]
    assert [h["relationship"] for h in implied["hops"][0]["in_path"]["hops"]] == ["USES_CURRENCY"]
    # Both sides of one type with the same relationship ("border both A and B") stay as written.
    same = plan(relationships=["BORDERS"], **{"and": {"start": "Togo", "relationships": ["BORDERS"]}})
    (intersection,) = paths.plan_candidates(same, [BENIN, TOGO], RELATIONSHIPS)
    assert [h["relationship"] for h in intersection["hops"]] == ["BORDERS"]


@pytest.mark.parametrize("asks_for", ["Country", None])
def test_a_plan_asking_for_its_starts_own_type_asks_for_the_one_type_the_questions_words_name(asks_for):
    located = [*RELATIONSHIPS, plan_graph.Relationship("LOCATED_IN", "Country", "Continent")]
    written = plan(relationships=["LOCATED_IN"], asks_for=asks_for)

    (continent,) = paths.plan_candidates(written, [BENIN], located, question="On which continent is Benin?")
    both = paths.plan_candidates(written, [BENIN], located, question="Where is Benin?")

    asked_by_the_way = paths.plan_candidates(
        written, [BENIN], located, question="Who heads the cities of the continent Benin lies on?"
    )

    assert [(h["direction"], h["type"]) for h in continent["hops"]] == [("out", "Continent")]
    assert len(both) == 2  # no type named: both ways along LOCATED_IN, as before
    assert len(asked_by_the_way) == 2  # types named on the way, not after "which"/"what"


def test_a_list_follows_a_relationship_the_question_names_but_the_plan_left_out_for_each_item():
    (each,) = paths.plan_candidates(plan(), [BENIN], RELATIONSHIPS, hinted=["BORDERS", "USES_CURRENCY"])
    (plain,) = paths.plan_candidates(plan(), [BENIN], RELATIONSHIPS, hinted=["BORDERS"])

    assert each["result"] == "group"
    assert [(h["relationship"], h["direction"]) for h in each["hops"]] == [
        ("BORDERS", "both"),
        ("USES_CURRENCY", "out"),
    ]
    assert plain["result"] == "entities" and len(plain["hops"]) == 1


def test_paths_that_fit_equally_well_are_all_queried_and_the_first_that_finds_something_answers():
    kumasi = plan_graph.Mention("Kumasi", "City", ("city:kumasi",))
    candidates = paths.plan_candidates(
        plan(start="Kumasi", asks_for="City", relationships=["CAPITAL_OF", "LOCATED_IN"]),
        [kumasi],
        RELATIONSHIPS,
    )
    state = plan_turn.PlanState(
        queries=[
            (candidates[0], {"results": [], "count": 0}),
            (candidates[1], {"results": [{"name": "Accra"}], "count": 1}),
        ]
    )

    assert [[h["relationship"] for h in c["hops"]] for c in candidates] == [
        ["CAPITAL_OF", "LOCATED_IN"],
        ["LOCATED_IN", "CAPITAL_OF"],
    ]
    assert state.chosen() == state.queries[1]


def test_a_start_named_like_an_entity_of_another_type_is_ranked_with_it_and_the_better_fit_starts():
    tagged = [*FILMS, plan_graph.Relationship("HAS_TAGS", "Movie", "Tag")]
    person = plan_graph.Mention("Jack Arnold", "Person", ("person:jack-arnold",))
    tag = plan_graph.Mention("jack arnold", "Tag", ("tag:jack-arnold",))
    question = "what movies can be described by jack arnold"
    # The model chose the Person; the relationship it named leaves from the Tag.
    chose_person = plan(start="Jack Arnold", asks_for="Movie", relationships=["HAS_TAGS"], answer="list")
    # It named none: the paths tie, and the one the question writes as its name goes first.
    named_none = plan(start="Jack Arnold", asks_for="Movie", relationships=[], answer="list")

    (best, *_) = paths.plan_candidates(chose_person, [person, tag], tagged, question=question)
    (tied, *_) = paths.plan_candidates(named_none, [person, tag], tagged, question=question)
    (capital, *_) = paths.plan_candidates(
        named_none, [person, tag], tagged, question="what movies did Jack Arnold direct"
    )

    assert best["start"] == [{"key": "tag:jack-arnold"}]
    assert [(h["relationship"], h["direction"]) for h in best["hops"]] == [("HAS_TAGS", "in")]
    assert tied["start"] == [{"key": "tag:jack-arnold"}]
    assert capital["start"] == [{"key": "person:jack-arnold"}]
    assert capital["hops"][0]["relationship"] == "DIRECTED_BY"


def test_common_words_the_graph_also_has_are_not_offered_beside_a_real_name():
    found = {
        "results": [
            entity("movie:rat-race", "Movie", "Rat Race"),
            entity("tag:actors", "Tag", "actors"),
            entity("movie:fall", "Movie", "Fall"),
        ]
    }

    named = plan_graph.mentions(
        found, "what genres do the films whose actors also appear in Rat Race fall under"
    )
    alone = plan_graph.mentions(
        {"results": [entity("tag:snowboarding", "Tag", "snowboarding")]},
        "which movies are about snowboarding",
    )

    assert [m.name for m in named] == ["Rat Race"]
    assert [m.name for m in alone] == ["snowboarding"]

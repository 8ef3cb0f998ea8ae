"""The small-model loop's path plans: the graph's typed paths, the plan's schema and query, the
cards the answer reads, and a planned turn step by step against the local test server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from apps.agents.llm.base import (
    ChatMessage,
    Done,
    GenerationConfig,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    ToolSpec,
)
from apps.agents.llm.openai_compat import OpenAICompatProvider
from apps.agents.loop import candidates as paths
from apps.agents.loop import plan as plan_step
from apps.agents.loop import plan_graph, plan_turn, word_relationships
from apps.agents.loop.prompt import LOOKUP_ID_PREFIX
from apps.agents.loop.schema import step_schema
from apps.agents.loop.turn import SmallModelTurn
from apps.graph_tools.registry import GraphVocabulary, tool_get
from tests.llm_server import Json, LLMTestServer, Stream, completion, text_chunks

VOCABULARY = GraphVocabulary(
    entity_types=("City", "Country", "Currency"),
    relationships=(
        ("BORDERS", "Country", "Country"),
        ("CAPITAL_OF", "City", "Country"),
        ("LOCATED_IN", "City", "Country"),
        ("USES_CURRENCY", "Country", "Currency"),
    ),
)


def spec(name: str, vocabulary: GraphVocabulary | None = None) -> ToolSpec:
    tool = tool_get(name)
    return ToolSpec(name=tool.name, description=tool.description, parameters=tool.input_schema(vocabulary))


PATHS = spec("query_paths", VOCABULARY)
TOOLS = [spec("hybrid_search"), spec("get_entity_edges"), PATHS]
RELATIONSHIPS = plan_graph.graph_relationships(PATHS)
BENIN = plan_graph.Mention("Benin", "Country", ("country:BJ",), ("area_km2", "population"))
NAIRA = plan_graph.Mention("Naira", "Currency", ("currency:NGN",))
TOGO = plan_graph.Mention("Togo", "Country", ("country:TG",), ("area_km2", "population"))


def entity(key: str, type_: str, name: str, **properties: Any) -> dict[str, Any]:
    return {"id": f"id-{key}", "key": key, "type": type_, "name": name, "properties": properties}


# --- the graph's typed paths ---


def test_the_relationships_are_read_from_the_path_tools_own_schema():
    assert [(r.source, r.type, r.target) for r in RELATIONSHIPS] == [
        ("Country", "BORDERS", "Country"),
        ("City", "CAPITAL_OF", "Country"),
        ("City", "LOCATED_IN", "Country"),
        ("Country", "USES_CURRENCY", "Currency"),
    ]
    assert plan_graph.graph_relationships(spec("query_paths")) == []


def test_typed_paths_from_a_type_connect_and_go_both_ways():
    texts = [p.text for p in plan_graph.typed_paths("City", RELATIONSHIPS, max_hops=2)]

    assert texts[0] == "City"
    assert "City -CAPITAL_OF-> Country" in texts
    assert "City -LOCATED_IN-> Country -USES_CURRENCY-> Currency" in texts
    assert "City -LOCATED_IN-> Country <-CAPITAL_OF- City" in texts
    assert not any("City -USES_CURRENCY->" in t for t in texts)


# --- the plan ---


def plan(**fields: Any) -> dict[str, Any]:
    return {
        "start": "Benin",
        "asks_for": "Country",
        "relationships": ["BORDERS"],
        "and": None,
        "answer": "list",
        **fields,
    }


def test_the_plan_schema_allows_only_named_starts_and_this_graphs_types_and_relationships():
    def without_shape(**fields: Any) -> dict[str, Any]:
        return {k: v for k, v in plan(**fields).items() if k != "answer"}

    listed = plan_step.plan_schema([BENIN, NAIRA], RELATIONSHIPS, "list")
    jsonschema.validate(without_shape(), listed)
    jsonschema.validate(
        without_shape(**{"and": {"start": "Naira", "relationships": ["USES_CURRENCY"]}}), listed
    )
    each = plan_step.plan_schema([BENIN, NAIRA], RELATIONSHIPS, "each")
    jsonschema.validate(without_shape(asks_for="Currency", relationships=["BORDERS", "USES_CURRENCY"]), each)
    largest = plan_step.plan_schema([BENIN, NAIRA], RELATIONSHIPS, "largest")
    jsonschema.validate(without_shape(relationships=[], property="area_km2"), largest)
    for wrong, schema in (
        (without_shape(start="Ghana"), listed),
        (without_shape(asks_for="Planet"), listed),
        (without_shape(relationships=["NEIGHBOURS"]), listed),
        (without_shape(relationships=["BORDERS"] * 4), listed),
        (without_shape(**{"and": {"start": "Nowhere", "relationships": []}}), listed),
        (without_shape(relationships=["BORDERS"]), each),
        (without_shape(relationships=[], property="height"), largest),
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, schema)


def test_the_shape_is_asked_first_and_comparisons_only_when_the_named_entities_have_numbers():
    with_numbers = plan_step.shape_schema([BENIN, NAIRA])
    without = plan_step.shape_schema([NAIRA])
    jsonschema.validate({"answer": "largest"}, with_numbers)
    jsonschema.validate({"answer": "each"}, without)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"answer": "largest"}, without)


@pytest.mark.parametrize(
    ("question", "yes_no"),
    [
        ("Is Polokwane the capital of South Africa?", True),
        ("does ghana border togo", True),
        ("Tell me whether Benin borders Togo.", True),
        ("Are there countries that border both Benin and Togo?", True),
        ("Which countries border Benin?", False),
        ("Is it true which currency Benin uses?", False),
        ("Can you list the neighbours of Liberia?", False),
        ("Do you know the capital of Ghana?", False),
        ("And its capital?", False),
    ],
)
def test_only_a_question_asked_to_be_answered_yes_or_no_may_take_the_yes_no_shape(question, yes_no):
    shapes = plan_step.allowed_shapes([BENIN, TOGO], question)

    assert ("yes/no" in shapes) is yes_no
    if yes_no:
        # The only shape: the provider does not ask the model for it.
        assert shapes == ["yes/no"]
    else:
        assert {"list", "count"} <= set(shapes)
    jsonschema.validate({"answer": shapes[0]}, plan_step.shape_schema([BENIN, TOGO], question))


@pytest.mark.parametrize(
    "question",
    [
        "List the neighbours of Liberia with their capitals.",
        "Which countries border Ghana, and what currency does each use?",
        "For every neighbour of Togo, name its capital.",
        "Give me the neighbours of Togo and their currencies",
    ],
)
def test_a_question_asking_something_of_each_item_takes_the_each_shape(question):
    assert plan_step.allowed_shapes([BENIN], question) == ["each"]
    # and only such a question: "and its" is one entity's follow-up
    assert "each" not in plan_step.allowed_shapes([BENIN], "What about its continent?")
    assert "each" not in plan_step.allowed_shapes([BENIN], "And its capital?")
    assert "each" in plan_step.allowed_shapes([BENIN], "How many neighbours does each country have?")
    assert len(plan_step.allowed_shapes([BENIN], "How many neighbours does each country have?")) > 1


def test_a_question_comparing_two_entities_by_a_number_takes_the_comparison_its_word_names():
    assert plan_step.allowed_shapes([BENIN, TOGO], "Which is larger, Benin or Togo?") == ["largest"]
    # Offered a choice, a question opening with an auxiliary still asks which, not yes or no.
    assert plan_step.allowed_shapes([BENIN, TOGO], "Does Benin or Togo have the larger population?") == [
        "largest"
    ]
    assert plan_step.allowed_shapes([BENIN, TOGO], "Is Togo smaller or Benin?") == ["smallest"]
    assert plan_step.allowed_shapes([BENIN, TOGO], "Does Benin border Togo or Ghana?") == ["yes/no"]
    assert plan_step.allowed_shapes([BENIN, TOGO], "which one has fewer people, benin or togo") == [
        "smallest"
    ]
    # Without numbers to compare, the question is planned like any other.
    assert "list" in plan_step.allowed_shapes([NAIRA], "Which is more used, the Naira or the Cedi?")
    assert "largest" in plan_step.allowed_shapes([BENIN, TOGO], "Which neighbour of Benin is the biggest?")
    assert "smallest" in plan_step.allowed_shapes([BENIN], "which city of benin has the fewest people")


@pytest.mark.parametrize(
    "question", ["What is the capital of Benin?", "and what is its capital?", "Which countries border Benin?"]
)
def test_a_question_asking_for_no_order_by_a_number_takes_no_comparison(question):
    shapes = plan_step.allowed_shapes([BENIN, TOGO], question)

    assert "largest" not in shapes
    assert "smallest" not in shapes
    assert "list" in shapes


@pytest.mark.parametrize(
    "question",
    [
        "How many countries use the Naira?",
        "In how many countries is the Naira the currency?",
        "how many neighbours has togo",
    ],
)
def test_a_question_asking_how_many_takes_the_count_shape(question):
    assert plan_step.allowed_shapes([BENIN, TOGO, NAIRA], question) == ["count"]
    jsonschema.validate({"answer": "count"}, plan_step.shape_schema([BENIN, TOGO, NAIRA], question))


def test_how_many_of_each_item_may_be_counted_or_grouped_and_how_many_inside_a_name_is_no_count():
    assert plan_step.allowed_shapes([BENIN], "How many neighbours does each country have?") == [
        "count",
        "each",
    ]
    film = plan_graph.Mention("How Many Miles to Babylon", "Movie", ("movie:1",))
    assert "list" in plan_step.allowed_shapes([film], "who directed How Many Miles to Babylon")


def test_words_of_a_relationships_name_are_found_in_their_irregular_forms_and_synonyms():
    books = [
        plan_graph.Relationship("WRITTEN_BY", "Book", "Person"),
        plan_graph.Relationship("DIRECTED_BY", "Book", "Person"),
        plan_graph.Relationship("SPEAKS", "Country", "Language"),
    ]

    assert word_relationships.word_hints("who wrote Dune", books)[1] == ["WRITTEN_BY"]
    assert word_relationships.word_hints("which languages are spoken in Peru", books) == (
        ["Language"],
        ["SPEAKS"],
    )
    assert word_relationships.word_hints("who directed Dune", books)[1] == ["DIRECTED_BY"]
    assert word_relationships.word_hints("List the neighbours of Liberia", RELATIONSHIPS)[1] == ["BORDERS"]
    assert word_relationships.word_hints("Name the capital of Togo", RELATIONSHIPS)[1] == ["CAPITAL_OF"]


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


# --- the cards ---


def test_a_lists_card_names_what_it_reached_right_after_the_type_and_counts_it_last():
    """Measured (MetaQA 1-hop): from "-HAS_IMDB_RATING-> Rating: 1 found: good" the model answered
    "the rating is 1", so the count comes last; for one entity of a list it is left out (the model
    copied "(1 in all)" into its answers), and a count keeps it."""
    film = entity("movie:1", "Movie", "Inside Llewyn Davis")
    good = entity("rating:good", "Rating", "good")
    hops = [{"relationship": "HAS_IMDB_RATING", "direction": "out", "type": "Rating"}]
    films = [entity(f"movie:{i}", "Movie", f"Film {i}") for i in range(40)]
    person = entity("person:1", "Person", "Ang Lee")
    directed = [{"relationship": "DIRECTED_BY", "direction": "in", "type": "Movie"}]

    one = plan_turn.plan_card({"hops": hops}, {"start": [film], "results": [good], "count": 1})
    long = plan_turn.plan_card({"hops": directed}, {"start": [person], "results": films, "count": 40})
    counted = plan_turn.plan_card(
        {"hops": directed, "result": "count"}, {"start": [person], "results": films[:3], "count": 3}
    )

    one_counted = plan_turn.plan_card(
        {"hops": hops, "result": "count"}, {"start": [film], "results": [good], "count": 1}
    )

    assert (
        one == "[Inside Llewyn Davis](entity:movie:1) -HAS_IMDB_RATING-> Rating: [good](entity:rating:good)."
    )
    assert one_counted.endswith("[good](entity:rating:good) (1 in all).")
    assert long.endswith("[Film 11](entity:movie:11) and 28 more (40 in all).")
    assert counted == (
        "[Ang Lee](entity:person:1) <-DIRECTED_BY- Movie: [Film 0](entity:movie:0), [Film 1](entity:movie:1), "
        "[Film 2](entity:movie:2) (3 in all)."
    )
    assert "found" not in one + long + counted


def test_the_cards_say_what_the_path_reached_in_each_shape():
    benin = entity("country:BJ", "Country", "Benin")
    togo, nigeria = entity("country:TG", "Country", "Togo"), entity("country:NG", "Country", "Nigeria")
    hops = [{"relationship": "BORDERS", "direction": "out", "type": "Country"}]
    path = [{"entity": benin}, {"relationship": "BORDERS", "direction": "out", "entity": togo}]

    listed = plan_turn.plan_card(
        {"hops": hops}, {"start": [benin], "results": [{**togo, "path": path}], "count": 1}
    )
    yes = plan_turn.plan_card(
        {"hops": hops}, {"start": [benin], "results": [{**togo, "path": path}], "count": 1, "exists": True}
    )
    no = plan_turn.plan_card({"hops": hops}, {"start": [benin], "results": [], "count": 0, "exists": False})
    ranked = plan_turn.plan_card(
        {"hops": [], "property": "area_km2"},
        {
            "start": [nigeria, benin],
            "results": [
                {**nigeria, "properties": {"area_km2": 923768}},
                {**benin, "properties": {"area_km2": 112622}},
            ],
            "count": 2,
            "max": {},
        },
    )

    assert listed == "[Benin](entity:country:BJ) -BORDERS-> Country: [Togo](entity:country:TG)."
    assert yes == "Yes: [Benin](entity:country:BJ) -BORDERS-> [Togo](entity:country:TG)"
    assert no == "No: the graph does not link them that way."
    assert ranked == (
        "By area_km2, largest first: [Nigeria](entity:country:NG): area_km2 923,768; "
        "[Benin](entity:country:BJ): area_km2 112,622."
    )


def test_a_per_item_result_is_written_out_by_the_loop_each_item_with_its_values():
    benin, togo, niger = (
        entity("country:BJ", "Country", "Benin"),
        entity("country:TG", "Country", "Togo"),
        entity("country:NE", "Country", "Niger"),
    )
    franc = entity("currency:XOF", "Currency", "CFA Franc")
    hops = [
        {"relationship": "BORDERS", "direction": "both", "type": "Country"},
        {"relationship": "USES_CURRENCY", "direction": "out", "type": "Currency"},
    ]
    groups = [
        {"entity": togo, "count": 1, "members": [franc]},
        {"entity": niger, "count": 1, "members": [franc]},
    ]

    written = plan_turn.group_answer({"hops": hops}, {"start": [benin], "groups": groups, "count": 1})

    assert written == (
        "From [Benin](entity:country:BJ) along BORDERS, each Country with its Currency (USES_CURRENCY):\n"
        "- [Togo](entity:country:TG): [CFA Franc](entity:currency:XOF)\n"
        "- [Niger](entity:country:NE): [CFA Franc](entity:currency:XOF)"
    )
    assert plan_turn.group_answer({"hops": hops}, {"start": [benin], "results": [franc], "count": 1}) == ""


def test_a_comparison_is_written_out_by_the_loop_first_by_the_number_then_the_others():
    nigeria, benin = entity("country:NG", "Country", "Nigeria"), entity("country:BJ", "Country", "Benin")
    result = {
        "start": [benin, nigeria],
        "results": [
            {**nigeria, "properties": {"area_km2": 923768}},
            {**benin, "properties": {"area_km2": 112622}},
        ],
        "count": 2,
        "max": {"property": "area_km2", "value": 923768},
    }
    smallest = {**result, "results": result["results"][::-1], "min": {"property": "area_km2"}}
    del smallest["max"]

    assert plan_turn.ranked_answer({"property": "area_km2"}, result) == (
        "[Nigeria](entity:country:NG) is the largest by area_km2 (923,768), "
        "then [Benin](entity:country:BJ) (112,622)."
    )
    assert plan_turn.ranked_answer({"property": "area_km2"}, smallest).startswith(
        "[Benin](entity:country:BJ) is the smallest by area_km2 (112,622)"
    )
    # No entity with the number: the model answers from the card ("None of them has …").
    assert plan_turn.ranked_answer({"property": "height"}, {**result, "max": {"property": "height"}}) == ""


async def test_a_per_item_plan_is_answered_by_the_loop_without_a_model_step(server: LLMTestServer):
    (arguments,) = paths.plan_candidates(
        plan(asks_for="Currency", relationships=["BORDERS", "USES_CURRENCY"], answer="each"),
        [BENIN],
        RELATIONSHIPS,
    )
    togo, franc = entity("country:TG", "Country", "Togo"), entity("currency:XOF", "Currency", "CFA Franc")
    result = {
        "start": [entity("country:BJ", "Country", "Benin")],
        "groups": [{"entity": togo, "count": 1, "members": [franc]}],
        "count": 1,
    }

    events = await run(provider_for(server), after(LOOKUP, ("call_1", "query_paths", arguments, result)))

    assert server.requests == []
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.endswith("- [Togo](entity:country:TG): [CFA Franc](entity:currency:XOF)")
    assert isinstance(events[-1], Done)


def test_a_long_result_is_cut_on_the_card_and_added_whole_after_the_answer():
    found = [entity(f"movie:{i}", "Movie", f"Film {i}") for i in range(40)]

    card = plan_turn.plan_card({"hops": []}, {"start": [], "results": found, "count": 40})

    assert "and 28 more" in card
    assert plan_turn.full_list({"results": found, "count": 40}) == found
    assert plan_turn.full_list({"results": found[:3], "count": 3}) == []


# --- a planned turn, step by step ---


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as s:
        yield s


def provider_for(server: LLMTestServer) -> SmallModelTurn:
    return SmallModelTurn(inner=OpenAICompatProvider(base_url=server.base_url, model="small", max_retries=0))


QUESTION = [
    ChatMessage(role="system", content="Be helpful."),
    ChatMessage(role="user", content="Which neighbours of Benin use the Naira?"),
]


def after(*calls: tuple[str, str, dict[str, Any], Any]) -> list[ChatMessage]:
    messages = list(QUESTION)
    for call_id, name, arguments, result in calls:
        messages.append(
            ChatMessage(
                role="assistant", tool_calls=[ToolCallRequest(id=call_id, name=name, arguments=arguments)]
            )
        )
        messages.append(ChatMessage(role="tool", tool_call_id=call_id, content=json.dumps(result)))
    return messages


async def run(provider: SmallModelTurn, messages: list[ChatMessage]) -> list[StreamEvent]:
    return [
        e async for e in provider.stream(messages, TOOLS, GenerationConfig(model="small", temperature=0.1))
    ]


LOOKUP = (
    f"{LOOKUP_ID_PREFIX}1",
    "query_paths",
    plan_graph.mention_lookup("Which neighbours of Benin use the Naira?"),
    {
        "start": [],
        "results": [entity("country:BJ", "Country", "Benin"), entity("currency:NGN", "Currency", "Naira")],
        "count": 2,
    },
)


async def test_a_planned_turn_first_looks_up_the_names_the_question_mentions_without_the_model(
    server: LLMTestServer,
):
    events = await run(provider_for(server), list(QUESTION))

    assert [type(e) for e in events] == [ToolCall, Done]
    call = events[0]
    assert isinstance(call, ToolCall) and call.id.startswith(LOOKUP_ID_PREFIX)
    assert (call.name, call.arguments) == (
        "query_paths",
        plan_graph.mention_lookup("Which neighbours of Benin use the Naira?"),
    )
    assert server.requests == []


async def test_then_the_model_writes_the_shape_then_a_plan_under_its_schema_and_the_loop_runs_it(
    server: LLMTestServer,
):
    written = plan(**{"and": {"start": "Naira", "relationships": ["USES_CURRENCY"]}})
    written.pop("answer")
    server.enqueue(Json(completion(json.dumps({"answer": "list"}))))
    server.enqueue(Json(completion(json.dumps(written))))

    events = await run(provider_for(server), after(LOOKUP))

    shape_sent, sent = server.requests
    jsonschema.validate({"answer": "list"}, shape_sent["response_format"]["json_schema"]["schema"])
    assert shape_sent["messages"][-1]["content"].endswith("The shape of the answer:")
    schema = sent["response_format"]["json_schema"]["schema"]
    jsonschema.validate(written, schema)
    assert sent["messages"][-1]["content"].endswith("Shape: list. The plan:")
    assert "Country -USES_CURRENCY-> Currency" in sent["messages"][0]["content"]
    assert "Entities named: Benin: Country" in sent["messages"][-1]["content"]
    call = events[0]
    assert isinstance(call, ToolCall) and not call.id.startswith(LOOKUP_ID_PREFIX)
    assert call.name == "query_paths"
    assert call.arguments["hops"][0]["in_path"]["start"] == [{"key": "currency:NGN"}]


async def test_the_answer_reads_the_plans_result_as_cards_of_names_and_links_what_it_names(
    server: LLMTestServer,
):
    nigeria = entity("country:NG", "Country", "Nigeria")
    (arguments,) = paths.plan_candidates(
        plan(**{"and": {"start": "Naira", "relationships": ["USES_CURRENCY"]}}), [BENIN, NAIRA], RELATIONSHIPS
    )
    result = {
        "start": [entity("country:BJ", "Country", "Benin")],
        "results": [{**nigeria, "path": []}],
        "count": 1,
    }
    server.enqueue(Stream(text_chunks("Nigeria uses ", "the Naira.")))

    events = await run(provider_for(server), after(LOOKUP, ("call_1", "query_paths", arguments, result)))

    prompt = server.requests[0]["messages"][-1]["content"]
    assert "Found in the graph:\nBenin -BORDERS- Country" in prompt
    assert "(only those also reached from the second entity named): Nigeria." in prompt
    assert "entity:" not in prompt  # the links cost the prompt tokens; the loop adds them
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "[Nigeria](entity:country:NG) uses the Naira."
    assert isinstance(events[-1], Done)


async def test_a_counts_answer_that_states_no_number_gets_the_count_after_it(server: LLMTestServer):
    (arguments,) = paths.plan_candidates(
        plan(start="Naira", relationships=["USES_CURRENCY"], answer="count"), [NAIRA], RELATIONSHIPS
    )
    found = [entity("country:NG", "Country", "Nigeria"), entity("country:BJ", "Country", "Benin")]
    result = {"start": [entity("currency:NGN", "Currency", "Naira")], "results": found, "count": 2}
    server.enqueue(Stream(text_chunks("The Naira is the currency in ", "Nigeria and Benin.")))

    events = await run(provider_for(server), after(LOOKUP, ("call_1", "query_paths", arguments, result)))

    assert arguments["result"] == "count"
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.endswith("Nigeria](entity:country:NG) and [Benin](entity:country:BJ).\n\nIn all: 2.")
    assert isinstance(events[-1], Done)


@pytest.mark.parametrize(
    ("answer", "added"),
    [
        ("There are 2 countries that use it.", ""),
        ("Two countries use it.", ""),
        ("It is used in [Benin](entity:c0a2-2-42) and Togo.", "\n\nIn all: 2."),  # a link's digits
        ("There are 3 countries.", "\n\nIn all: 2."),
    ],
)
def test_a_count_is_added_only_where_the_answer_does_not_state_it(answer, added):
    assert plan_turn.count_missing(answer, 2) == added
    assert plan_turn.count_missing(answer, None) == ""


FILMED_IN = [{"relationship": "FILMED_IN", "direction": "in", "type": "Movie"}]


async def test_a_long_list_is_added_whole_after_the_models_sentence(server: LLMTestServer):
    films = [entity(f"movie:{i}", "Movie", f"Film number {i}") for i in range(40)]
    result = {"start": [entity("country:BJ", "Country", "Benin")], "results": films, "count": 40}
    server.enqueue(Stream(text_chunks("Here they are.")))

    events = await run(
        provider_for(server),
        after(LOOKUP, ("call_1", "query_paths", {"start": [], "hops": FILMED_IN}, result)),
    )

    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "one short sentence that names the first three" in server.requests[0]["messages"][-1]["content"]
    assert text.startswith("Here they are.\n\nAll 40 found: [Film number 0](entity:movie:0)")
    assert "[Film number 39](entity:movie:39)" in text


# The loop's look-up of the names a question mentions, having found none.
NOTHING_NAMED = (
    f"{LOOKUP_ID_PREFIX}1",
    "query_paths",
    plan_graph.mention_lookup("?"),
    {"start": [], "results": [], "count": 0},
)


async def test_a_question_that_names_nothing_goes_the_earlier_way_a_forced_search(server: LLMTestServer):
    server.enqueue(Json(completion('{"name": "hybrid_search", "arguments": {"query": "Qualumistan"}}')))

    events = await run(provider_for(server), after(NOTHING_NAMED))

    assert server.requests[0]["response_format"]["json_schema"]["schema"] == step_schema(TOOLS[:2])
    assert isinstance(events[0], ToolCall) and events[0].name == "hybrid_search"


async def test_the_earlier_recipes_forced_search_reads_the_system_prompt_of_every_other_step(
    server: LLMTestServer,
):
    server.enqueue(Json(completion('{"name": "hybrid_search", "arguments": {"query": "Qualumistan"}}')))
    await run(provider_for(server), after(NOTHING_NAMED))
    searched = ("call_2", "hybrid_search", {"query": "Qualumistan"}, {"results": []})
    server.enqueue(Stream(text_chunks("I could not find it in the knowledge graph.")))

    await run(provider_for(server), after(NOTHING_NAMED, searched))

    forced, answer = server.requests
    # One system prompt for every step, the plan's included (its rules and the path tool): the
    # server's prompt cache holds it, instead of reading ~2,000 tokens anew at each switch.
    assert answer["messages"][0] == forced["messages"][0]
    assert "This graph's relationships" in forced["messages"][0]["content"]
    # The forced search still cannot call the path tool.
    assert forced["response_format"]["json_schema"]["schema"] == step_schema(TOOLS[:2])


async def test_a_plan_that_found_nothing_hands_over_to_the_look_ups_of_the_named_entities(
    server: LLMTestServer,
):
    arguments = {
        "start": [{"key": "country:BJ"}],
        "hops": [{"relationship": "BORDERS", "direction": "in", "type": "Country"}],
    }
    empty = {"start": [entity("country:BJ", "Country", "Benin")], "results": [], "count": 0}

    events = await run(provider_for(server), after(LOOKUP, ("call_1", "query_paths", arguments, empty)))

    call = events[0]
    assert isinstance(call, ToolCall) and call.id.startswith(LOOKUP_ID_PREFIX)
    assert (call.name, call.arguments) == ("get_entity_edges", {"entity_id": "country:BJ", "limit": 500})
    assert server.requests == []


@pytest.mark.parametrize("shape", ["entities", "exists"])
async def test_a_plan_along_no_relationship_that_reached_only_its_start_hands_over_to_its_look_ups(
    server: LLMTestServer, shape: str
):
    """ "describe the movie X in a few words" planned with no relationship reached X itself, and the
    answer invented a plot; "is X considered good" answered "Yes" because X exists."""
    benin = entity("country:BJ", "Country", "Benin")
    arguments = {"start": [{"key": "country:BJ"}], "hops": [], "result": shape}
    itself = {"start": [benin], "results": [{**benin, "path": [{"entity": benin}]}], "count": 1}
    if shape == "exists":
        itself["exists"] = True

    events = await run(provider_for(server), after(LOOKUP, ("call_1", "query_paths", arguments, itself)))

    call = events[0]
    assert isinstance(call, ToolCall) and call.id.startswith(LOOKUP_ID_PREFIX)
    assert (call.name, call.arguments) == ("get_entity_edges", {"entity_id": "country:BJ", "limit": 500})
    assert server.requests == []


async def test_an_agent_without_a_path_tool_takes_the_forced_search_and_its_prompt_has_no_plan_rules(
    server: LLMTestServer,
):
    server.enqueue(Json(completion('{"name": "hybrid_search", "arguments": {"query": "Benin"}}')))

    events = [
        e
        async for e in provider_for(server).stream(
            list(QUESTION), TOOLS[:2], GenerationConfig(model="small", temperature=0.1)
        )
    ]

    sent = server.requests[0]
    assert sent["response_format"]["json_schema"]["schema"] == step_schema(TOOLS[:2])
    assert "This graph's relationships" not in sent["messages"][0]["content"]
    assert isinstance(events[0], ToolCall) and events[0].name == "hybrid_search"


async def test_a_plan_the_graph_cannot_run_falls_back_to_the_forced_search_without_the_path_tool(
    server: LLMTestServer,
):
    server.enqueue(Json(completion(json.dumps({"answer": "list"}))))
    server.enqueue(Json(completion("not a plan")))
    server.enqueue(Json(completion('{"name": "hybrid_search", "arguments": {"query": "Benin"}}')))

    events = await run(provider_for(server), after(LOOKUP))

    assert len(server.requests) == 3
    assert server.requests[2]["response_format"]["json_schema"]["schema"] == step_schema(TOOLS[:2])
    assert isinstance(events[0], ToolCall) and events[0].name == "hybrid_search"


async def test_after_a_plan_that_found_nothing_the_answer_reads_the_cards_and_not_the_empty_query(
    server: LLMTestServer,
):
    arguments = {
        "start": [{"key": "country:BJ"}],
        "hops": [{"relationship": "BORDERS", "direction": "in", "type": "Country"}],
    }
    benin = entity("country:BJ", "Country", "Benin")
    empty = {"start": [benin], "results": [], "count": 0}
    togo, naira = entity("country:TG", "Country", "Togo"), entity("currency:NGN", "Currency", "Naira")
    card = {
        "entity": benin,
        "edges": [
            {"type": "BORDERS", "direction": "out", "other": togo, "properties": {}},
            {
                "type": "BORDERS",
                "direction": "out",
                "other": entity("country:NE", "Country", "Niger"),
                "properties": {},
            },
        ],
    }
    naira_card = {"entity": naira, "edges": []}
    server.enqueue(Stream(text_chunks("Benin borders Togo.")))

    events = await run(
        provider_for(server),
        after(
            LOOKUP,
            ("call_1", "query_paths", arguments, empty),
            (f"{LOOKUP_ID_PREFIX}2", "get_entity_edges", {"entity_id": "country:BJ", "limit": 500}, card),
            (
                f"{LOOKUP_ID_PREFIX}3",
                "get_entity_edges",
                {"entity_id": "currency:NGN", "limit": 500},
                naira_card,
            ),
        ),
    )

    prompt = "\n".join(m["content"] for m in server.requests[0]["messages"][1:])
    assert "Looked up in the graph:" in prompt and "[Togo](entity:country:TG)" in prompt
    assert "query_paths" not in prompt
    assert any(isinstance(e, TextDelta) for e in events)


def test_results_a_short_lists_answer_leaves_out_are_added_after_it():
    arguments = {"start": [{"key": "country:BJ"}], "hops": [], "result": "entities"}
    found = [entity("country:TG", "Country", "Togo"), entity("country:NG", "Country", "Nigeria")]
    result = {"results": found, "count": 2}
    must = plan_turn.answer_must_name(arguments, result)

    lost = plan_turn.unnamed_results(
        "To answer this question, I'll follow these steps: 1. look up Benin.", must
    )
    some = plan_turn.unnamed_results("Benin borders Togo.", must)
    every = plan_turn.unnamed_results("Benin borders Togo and Nigeria.", must)

    assert lost == "\n\nFound in the graph: [Togo](entity:country:TG), [Nigeria](entity:country:NG)."
    assert some == "\n\nAlso found: [Nigeria](entity:country:NG)."
    assert every == ""
    # A count, a yes/no and a long list (added whole anyway) need no such line.
    assert plan_turn.answer_must_name({**arguments, "result": "count"}, result) == []
    assert plan_turn.answer_must_name({**arguments, "result": "exists"}, {**result, "exists": True}) == []
    many = [entity(f"c:{i}", "Country", f"C{i}") for i in range(plan_graph.CARD_SHOWN + 1)]
    assert plan_turn.answer_must_name(arguments, {"results": many, "count": len(many)}) == []

"""The plan step's schemas and the question's grammar: the graph's typed paths, the answer
shapes a question allows, and the words that name the graph's types and relationships."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from apps.agents.loop import plan as plan_step
from apps.agents.loop import plan_graph, word_relationships
from tests.agents.loop.plan_support import BENIN, NAIRA, RELATIONSHIPS, TOGO, plan, spec

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
        assert "list" in shapes
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


@pytest.mark.parametrize(
    ("question", "count"),
    [
        ("What is the capital of Benin?", False),
        ("Which countries border Togo?", False),
        ("What is the number of countries that use the Naira?", True),
        ("Count the neighbours of Benin", True),
    ],
)
def test_only_a_question_that_asks_a_number_may_take_the_count_shape(question, count):
    assert ("count" in plan_step.allowed_shapes([BENIN, TOGO, NAIRA], question)) is count

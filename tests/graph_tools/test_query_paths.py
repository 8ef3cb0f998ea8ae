"""query_paths on a small hand-made graph: every result shape, its bounds and its errors.

West Africa (each border stored once, so "out", "in" and "both" differ)::

    Benin -BORDERS-> Togo, Nigeria, Niger, Burkina Faso
    Togo  -BORDERS-> Ghana, Burkina Faso
    Ghana -BORDERS-> Burkina Faso
    Niger -BORDERS-> Nigeria, Burkina Faso
    Benin, Togo, Niger, Burkina Faso -USES_CURRENCY-> CFA franc; Nigeria -> Naira; Ghana -> Cedi
    Porto-Novo -CAPITAL_OF-> Benin, Lomé -CAPITAL_OF-> Togo, Accra -CAPITAL_OF-> Ghana
    every city -LOCATED_IN-> its country; Kumasi -LOCATED_IN-> Ghana
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection

from apps.graph_tools import paths
from apps.graph_tools.errors import EntityNotFound, ToolArgumentError
from apps.graph_tools.models import GraphObject
from apps.projects.models import Project
from tests.factories import make_entity, make_project, make_relationship
from tests.graph_tools.conftest import call_tool

COUNTRIES = {
    "BJ": ("Benin", 12_123_000, 112_622),
    "TG": ("Togo", 8_278_000, 56_785),
    "GH": ("Ghana", 31_073_000, 238_533),
    "NG": ("Nigeria", 206_140_000, 923_768),
    "NE": ("Niger", 24_207_000, 1_267_000),
    "BF": ("Burkina Faso", 20_903_000, 274_200),
}
BORDERS = [("BJ", "TG"), ("BJ", "NG"), ("BJ", "NE"), ("BJ", "BF"), ("TG", "GH"), ("TG", "BF"), ("GH", "BF")]
BORDERS += [("NE", "NG"), ("NE", "BF")]
CURRENCY = {"BJ": "XOF", "TG": "XOF", "NE": "XOF", "BF": "XOF", "NG": "NGN", "GH": "GHS"}
CITIES = {
    "porto-novo": ("Porto-Novo", "BJ", 264_320, True),
    "cotonou": ("Cotonou", "BJ", 679_012, False),
    "lome": ("Lomé", "TG", 837_437, True),
    "accra": ("Accra", "GH", 2_291_352, True),
    "kumasi": ("Kumasi", "GH", 3_348_000, False),
}


@dataclass
class Africa:
    project: Project
    e: dict[str, GraphObject]

    def call(self, **arguments: Any) -> dict[str, Any]:
        return call_tool(self.project, "query_paths", **arguments)


def build_africa() -> Africa:
    project = make_project(name="West Africa")
    e: dict[str, GraphObject] = {}
    for iso, (name, population, area) in COUNTRIES.items():
        e[iso] = make_entity(
            project, f"country:{iso}", type="Country", name=name,
            properties={"population": population, "area_km2": area, "iso": iso},
        )  # fmt: skip
    for code, name in {"XOF": "CFA franc", "NGN": "Naira", "GHS": "Cedi"}.items():
        e[code] = make_entity(project, f"currency:{code}", type="Currency", name=name)
    for key, (name, country, population, capital) in CITIES.items():
        e[key] = make_entity(
            project, f"city:{key}", type="City", name=name, properties={"population": population}
        )
        make_relationship(project, e[key], "LOCATED_IN", e[country])
        if capital:
            make_relationship(project, e[key], "CAPITAL_OF", e[country])
    for a, b in BORDERS:
        make_relationship(project, e[a], "BORDERS", e[b])
    for iso, code in CURRENCY.items():
        make_relationship(project, e[iso], "USES_CURRENCY", e[code])
    return Africa(project=project, e=e)


@pytest.fixture
def africa(db: None) -> Africa:
    return build_africa()


def names(result: dict[str, Any]) -> list[str]:
    return [r["name"] for r in result["results"]]


def path_names(item: dict[str, Any]) -> list[str]:
    return [step["entity"]["name"] for step in item["path"]]


# --- the set, and the path of each result ---


def test_one_hop_lists_the_neighbours_in_both_directions_each_with_its_path(africa: Africa):
    result = africa.call(start=["Togo"], hops=[{"relationship": "BORDERS"}])

    assert names(result) == ["Benin", "Burkina Faso", "Ghana"]
    assert result["count"] == 3
    assert result["truncated"] is False
    benin = result["results"][0]
    assert {"id", "key", "type", "name", "path"} <= benin.keys()
    assert benin["path"] == [
        {"entity": {"id": str(africa.e["TG"].id), "key": "country:TG", "type": "Country", "name": "Togo"}},
        {
            "relationship": "BORDERS",
            "direction": "in",
            "entity": {"id": str(africa.e["BJ"].id), "key": "country:BJ", "type": "Country", "name": "Benin"},
        },
    ]
    assert result["start"] == [
        {"id": str(africa.e["TG"].id), "key": "country:TG", "type": "Country", "name": "Togo"}
    ]


def test_direction_out_and_in_follow_one_way_only(africa: Africa):
    out = africa.call(start=["Togo"], hops=[{"relationship": "BORDERS", "direction": "out"}])
    inc = africa.call(start=["Togo"], hops=[{"relationship": "BORDERS", "direction": "in"}])

    assert names(out) == ["Burkina Faso", "Ghana"]
    assert names(inc) == ["Benin"]


def test_inverse_fact_the_country_whose_capital_a_city_is(africa: Africa):
    result = africa.call(start=["Porto-Novo"], hops=[{"relationship": "CAPITAL_OF", "direction": "out"}])

    assert names(result) == ["Benin"]


def test_two_hops_chain_the_capital_of_the_country_a_city_lies_in(africa: Africa):
    result = africa.call(
        start=[{"name": "kumasi"}],
        hops=[
            {"relationship": "LOCATED_IN", "type": "Country"},
            {"relationship": "CAPITAL_OF", "direction": "in"},
        ],
    )

    assert names(result) == ["Accra"]
    assert path_names(result["results"][0]) == ["Kumasi", "Ghana", "Accra"]


def test_a_path_never_returns_to_its_start(africa: Africa):
    result = africa.call(start=["Benin"], hops=[{"relationship": "BORDERS"}, {"relationship": "BORDERS"}])

    assert "Benin" not in names(result)
    assert names(result) == ["Burkina Faso", "Ghana", "Niger", "Nigeria", "Togo"]


def test_any_relationship_with_an_entity_type_filter(africa: Africa):
    result = africa.call(start=["Ghana"], hops=[{"type": "City"}])

    assert names(result) == ["Accra", "Kumasi"]


# --- filters and intersections ---


def test_intersection_the_countries_that_border_both_benin_and_ghana(africa: Africa):
    result = africa.call(start=["Benin", "Ghana"], start_match="all", hops=[{"relationship": "BORDERS"}])

    assert names(result) == ["Burkina Faso", "Togo"]
    togo = result["results"][1]
    assert path_names(togo) == ["Benin", "Togo"]
    assert [[s["entity"]["name"] for s in p] for p in togo["also"]] == [["Ghana", "Togo"]]


def test_filtered_list_the_neighbours_of_benin_that_use_the_naira(africa: Africa):
    result = africa.call(
        start=["Benin"],
        hops=[
            {
                "relationship": "BORDERS",
                "in_path": {
                    "start": ["Naira"],
                    "hops": [{"relationship": "USES_CURRENCY", "direction": "in"}],
                },
            }
        ],
    )

    assert names(result) == ["Nigeria"]


def test_property_filters_compare_numbers_as_numbers(africa: Africa):
    big = africa.call(
        start=["Ghana"],
        hops=[
            {
                "relationship": "LOCATED_IN",
                "where": [{"property": "population", "op": ">", "value": 3_000_000}],
            }
        ],
    )
    not_big = africa.call(
        start=["Ghana"],
        hops=[
            {
                "relationship": "LOCATED_IN",
                "where": [{"property": "population", "op": "<=", "value": 3_000_000}],
            }
        ],
    )
    by_text = africa.call(
        start=["Benin"], hops=[{"relationship": "BORDERS", "where": [{"property": "iso", "value": "NG"}]}]
    )

    assert names(big) == ["Kumasi"]
    assert names(not_big) == ["Accra"]
    assert names(by_text) == ["Nigeria"]


# --- result shapes ---


def test_count_over_an_inverse_relationship_how_many_countries_use_the_cfa_franc(africa: Africa):
    result = africa.call(
        start=["CFA franc"], hops=[{"relationship": "USES_CURRENCY", "direction": "in"}], result="count"
    )

    assert result["count"] == 4
    assert names(result) == ["Benin", "Burkina Faso", "Niger", "Togo"]


def test_exists_answers_yes_or_no(africa: Africa):
    def borders(a: str, b: str) -> bool:
        result = africa.call(start=[a, b], start_match="all", hops=[], result="exists")
        adjacent = africa.call(
            start=[a],
            hops=[{"relationship": "BORDERS", "in_path": {"start": [b]}}],
            result="exists",
        )
        assert result["exists"] is False  # two different countries are not one another
        return bool(adjacent["exists"])

    assert borders("Ghana", "Togo") is True
    assert borders("Ghana", "Nigeria") is False


def test_group_by_each_neighbours_currency(africa: Africa):
    result = africa.call(
        start=["Ghana"],
        hops=[{"relationship": "BORDERS"}, {"relationship": "USES_CURRENCY", "direction": "out"}],
        result="group",
    )

    assert [
        (g["entity"]["name"], g["count"], [m["name"] for m in g["members"]]) for g in result["groups"]
    ] == [
        ("Burkina Faso", 1, ["CFA franc"]),
        ("Togo", 1, ["CFA franc"]),
    ]


def test_group_by_the_last_step_counts_what_reaches_each(africa: Africa):
    result = africa.call(
        start=["Benin"],
        hops=[{"relationship": "BORDERS"}, {"relationship": "USES_CURRENCY", "direction": "out"}],
        result="group",
        group_by=2,
    )

    assert [
        (g["entity"]["name"], g["count"], [m["name"] for m in g["members"]]) for g in result["groups"]
    ] == [
        ("CFA franc", 3, ["Burkina Faso", "Niger", "Togo"]),
        ("Naira", 1, ["Nigeria"]),
    ]


def test_max_and_min_of_a_numeric_property_compare_starts(africa: Africa):
    larger = africa.call(start=["Benin", "Togo"], result="max", property="area_km2")
    smaller = africa.call(
        start=["Ghana"], hops=[{"relationship": "LOCATED_IN"}], result="min", property="population"
    )

    assert larger["max"] == {
        "property": "area_km2",
        "value": 112_622,
        "entities": [{"id": str(africa.e["BJ"].id), "key": "country:BJ", "type": "Country", "name": "Benin"}],
    }
    assert names(larger) == ["Benin", "Togo"]
    assert smaller["min"]["value"] == 2_291_352
    assert [e["name"] for e in smaller["min"]["entities"]] == ["Accra"]


# --- starts ---


def test_starts_by_key_by_search_and_by_the_names_a_question_mentions(africa: Africa):
    by_key = africa.call(start=[{"key": "country:GH"}], hops=[{"relationship": "CAPITAL_OF"}])
    by_search = africa.call(start=[{"search": "Porto-Novo"}], hops=[{"relationship": "CAPITAL_OF"}])
    mentioned = africa.call(start=[{"mentioned_in": "whats the capital of ghana's neighbour burkina faso?"}])

    assert names(by_key) == ["Accra"]
    assert names(by_search) == ["Benin"]
    assert names(mentioned) == ["Burkina Faso", "Ghana"]


def test_a_name_that_matches_nothing_is_listed_not_found_and_an_unknown_key_is_an_error(africa: Africa):
    result = africa.call(start=["Qualumistan"], hops=[{"relationship": "BORDERS"}])

    assert result["not_found"] == ["Qualumistan"]
    assert result["results"] == [] and result["count"] == 0
    with pytest.raises(EntityNotFound):
        africa.call(start=[{"key": "country:XX"}])


# --- bounds and errors ---


def test_a_hop_over_its_fan_out_limit_is_cut_and_says_so(africa: Africa, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(paths.walk, "HOP_EDGE_LIMIT", 2)

    result = africa.call(start=["Benin"], hops=[{"relationship": "BORDERS"}])

    assert result["truncated"] is True
    assert result["count"] == 2
    assert "hop 1" in result["truncation"][0]


def test_results_beyond_the_limit_are_counted_and_the_cut_is_explicit(africa: Africa):
    result = africa.call(start=["Benin"], hops=[{"relationship": "BORDERS"}], limit=2)

    assert len(result["results"]) == 2
    assert result["count"] == 4
    assert result["truncated"] is True
    assert "2 of 4" in result["truncation"][0]


def test_a_statement_over_the_timeout_is_a_query_timeout_error(
    africa: Africa, monkeypatch: pytest.MonkeyPatch
):
    def slow(project_id: Any, args: Any) -> dict[str, Any]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(2)")
        return {}

    monkeypatch.setattr(paths.result, "STATEMENT_TIMEOUT_MS", 50)
    monkeypatch.setattr(paths.result, "_run", slow)

    with pytest.raises(paths.PathQueryTimeout) as exc:
        africa.call(start=["Benin"])

    assert exc.value.code == "query_timeout"


@pytest.mark.parametrize(
    ("arguments", "argument"),
    [
        ({"start": ["Benin"], "hops": [{"relationship": "NEIGHBOURS"}]}, "hops.0.relationship"),
        ({"start": ["Benin"], "hops": [{"relationship": "BORDERS"}, {"type": "Planet"}]}, "hops.1.type"),
        ({"start": [{"name": "Benin", "type": "Planet"}]}, "start.0.type"),
        (
            {
                "start": ["Benin"],
                "hops": [{"in_path": {"start": ["Naira"], "hops": [{"relationship": "PAYS_WITH"}]}}],
            },
            "hops.0.in_path.hops.0.relationship",
        ),
        ({"start": ["Benin"], "hops": [{"relationship": "x' OR '1'='1"}]}, "hops.0.relationship"),
        ({"start": [{"name": "Benin", "key": "country:BJ"}]}, "start.0"),
        ({"start": []}, "start"),
        ({"start": ["Benin"], "hops": [{}] * 5}, "hops"),
        ({"start": ["Benin"], "result": "max"}, None),
        ({"start": ["Benin"], "hops": [{"direction": "sideways"}]}, "hops.0.direction"),
    ],
)
def test_unknown_types_and_bad_arguments_are_invalid_arguments_naming_the_argument(
    africa: Africa, arguments, argument
):
    with pytest.raises(ToolArgumentError) as exc:
        africa.call(**arguments)

    assert exc.value.code == "invalid_arguments"
    if argument is not None:
        assert exc.value.argument is not None and exc.value.argument.startswith(argument)


def test_property_names_and_values_are_parameters_not_sql(africa: Africa):
    result = africa.call(
        start=["Benin"],
        hops=[
            {"relationship": "BORDERS", "where": [{"property": "iso') OR true --", "value": "1' OR '1'='1"}]}
        ],
    )

    assert result["results"] == []


# --- the schema names the project's types ---


def test_the_schema_of_a_project_offers_its_relationship_and_entity_types_as_enums(africa: Africa):
    from apps.graph_tools.selectors import project_tools

    schema = next(
        t.input_schema for t in project_tools(project_id=africa.project.id) if t.tool.name == "query_paths"
    )

    hop = schema["$defs"]["Hop"]["properties"]
    relationship = next(b for b in hop["relationship"]["anyOf"] if b.get("type") == "string")
    entity_type = next(b for b in hop["type"]["anyOf"] if b.get("type") == "string")
    assert relationship["enum"] == ["BORDERS", "CAPITAL_OF", "LOCATED_IN", "USES_CURRENCY"]
    assert entity_type["enum"] == ["City", "Country", "Currency"]
    assert "City -CAPITAL_OF-> Country" in hop["relationship"]["description"]

"""The cards a planned turn's answer reads, and the answers the loop writes out itself (per item,
a comparison, a count, a long list)."""

from __future__ import annotations

from apps.agents.loop import plan_turn
from tests.agents.loop.plan_support import entity

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


def test_a_long_result_is_cut_on_the_card_and_added_whole_after_the_answer():
    found = [entity(f"movie:{i}", "Movie", f"Film {i}") for i in range(40)]

    card = plan_turn.plan_card({"hops": []}, {"start": [], "results": found, "count": 40})

    assert "and 28 more" in card
    assert plan_turn.full_list({"results": found, "count": 40}) == found
    assert plan_turn.full_list({"results": found[:3], "count": 3}) == []

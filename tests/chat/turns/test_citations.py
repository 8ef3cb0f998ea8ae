"""Checked citations while streaming: however the text is split into deltas, the result is the same."""

from apps.chat.turns.citations import CitationFilter, KnownEntities, check_citations

PARIS = {"id": "11111111-1111-1111-1111-111111111111", "key": "paris", "type": "City", "name": "Paris"}
TEXT = (
    "See [Paris](entity:11111111-1111-1111-1111-111111111111), [the capital](entity:paris), "
    "[Atlantis](entity:22222222-2222-2222-2222-222222222222), [a normal link](https://x.org) and [brackets]."
)
EXPECTED = (
    "See [Paris](entity:11111111-1111-1111-1111-111111111111), "
    "[the capital](entity:11111111-1111-1111-1111-111111111111), Atlantis, [a normal link](https://x.org) "
    "and [brackets]."
)


def known() -> KnownEntities:
    entities = KnownEntities()
    entities.add_result({"results": [{**PARIS, "score": 0.9}]})
    return entities


def stream(chunks: list[str]) -> tuple[str, list[str]]:
    f = CitationFilter(known())
    out = "".join(f.feed(c) for c in chunks) + f.flush()
    return out, [c.key for c in f.citations]


def test_links_to_returned_entities_survive_and_others_become_plain_text():
    text, citations = check_citations(TEXT, known())

    assert text == EXPECTED
    assert [c.key for c in citations] == ["paris"]


def test_every_split_into_two_deltas_gives_the_same_text():
    for cut in range(len(TEXT) + 1):
        assert stream([TEXT[:cut], TEXT[cut:]]) == (EXPECTED, ["paris"]), cut


def test_one_character_deltas_give_the_same_text():
    assert stream(list(TEXT)) == (EXPECTED, ["paris"])


def test_an_unclosed_bracket_is_released_when_the_stream_ends():
    assert stream(["Half [a link", " that never ends"]) == ("Half [a link that never ends", [])


def test_entities_learnt_in_this_turn_are_what_gets_stored():
    entities = KnownEntities({PARIS["id"]: PARIS})

    entities.add_result(
        {"entity": PARIS, "edges": [{"other": {**PARIS, "id": "3", "key": "lyon", "name": "Lyon"}}]}
    )

    assert list(entities.new) == ["3"]


# Refs no tool returned, in the forms small models write them (issue #12): all of them go.
MADE_UP = "123e4567-e89b-12d3-a456-426614174000"
FORMS_TEXT = (
    f"[entity:{MADE_UP}] - Elbonia is (entity:{MADE_UP}) big, see entity:{MADE_UP}.\n"
    f"```\nentity:{MADE_UP}\n```\n"
    f"[entity:{MADE_UP}](entity:paris) and [Atlantis](entity:atlantis:1); "
    "kept: [entity:paris], entity:paris! identity:x (entity:) [entity:bad ref] entity:"
)
FORMS_EXPECTED = (
    " - Elbonia is  big, see .\n"
    "```\n\n```\n"
    "[Paris](entity:11111111-1111-1111-1111-111111111111) and Atlantis; "
    "kept: [entity:paris], entity:paris! identity:x (entity:) [ ref] entity:"
)


def test_unknown_refs_are_removed_in_every_form_and_known_ones_kept():
    text, citations = check_citations(FORMS_TEXT, known())

    assert text == FORMS_EXPECTED
    assert MADE_UP not in text
    assert [c.key for c in citations] == ["paris"]


def test_every_split_of_the_other_forms_gives_the_same_text():
    for cut in range(len(FORMS_TEXT) + 1):
        assert stream([FORMS_TEXT[:cut], FORMS_TEXT[cut:]]) == (FORMS_EXPECTED, ["paris"]), cut


def test_every_split_into_three_deltas_around_a_bare_ref_gives_the_same_text():
    text = f"A entity:{MADE_UP}, B [entity:{MADE_UP}](entity:paris)."
    expected, _ = check_citations(text, known())

    for a in range(len(text) + 1):
        for b in range(a, len(text) + 1):
            assert stream([text[:a], text[a:b], text[b:]])[0] == expected, (a, b)


def test_one_character_deltas_of_the_other_forms_give_the_same_text():
    assert stream(list(FORMS_TEXT)) == (FORMS_EXPECTED, ["paris"])


def test_a_ref_that_ends_the_stream_is_decided_when_it_ends():
    assert stream(["Capital: entity:", MADE_UP[:8]]) == ("Capital: ", [])
    assert stream(["Capital: entity:par", "is"]) == ("Capital: entity:paris", [])


# How the offline model writes a link when plain chat's prompt lists each entity as one
# ("- [Asmara](entity:<id>) (City)"): the name, then the ref in parentheses.
PAREN_TEXT = "The capital is Paris (entity:11111111-1111-1111-1111-111111111111). Lyon (entity:paris) too."


def test_a_known_ref_in_parentheses_after_its_name_cites_the_entity_and_shows_no_id():
    expected = ("The capital is Paris . Lyon  too.", ["paris"])

    assert stream([PAREN_TEXT]) == expected
    assert stream(list(PAREN_TEXT)) == expected
    for cut in range(len(PAREN_TEXT) + 1):
        assert stream([PAREN_TEXT[:cut], PAREN_TEXT[cut:]]) == expected, cut


# Passages of documents (issue 26): their own link kind, checked the same way.
PASSAGE = {
    "id": "33333333-3333-3333-3333-333333333333",
    "document_id": "44444444-4444-4444-4444-444444444444",
    "document_name": "harbour.md",
    "page": None,
    "text": "The lighthouse of Porto Velho was built in 1871 by the engineer Marta Lobo.",
}
PASSAGE_TEXT = (
    "Built in 1871 [harbour.md](passage:33333333-3333-3333-3333-333333333333) near "
    "[Paris](entity:paris); [a guess](passage:55555555-5555-5555-5555-555555555555) and "
    "(passage:55555555-5555-5555-5555-555555555555) passage:66 are gone, passage: stays, "
    "[Paris](passage:paris) is no passage."
)
PASSAGE_EXPECTED = (
    "Built in 1871 [harbour.md](passage:33333333-3333-3333-3333-333333333333) near "
    "[Paris](entity:11111111-1111-1111-1111-111111111111); a guess and "
    "  are gone, passage: stays, "
    "Paris is no passage."
)


def known_with_passage() -> KnownEntities:
    found = known()
    found.add_result({"results": [{**PASSAGE, "score": 0.03}]})
    return found


def test_a_cited_passage_a_tool_returned_survives_and_an_unknown_one_is_removed():
    text, citations = check_citations(PASSAGE_TEXT, known_with_passage())

    assert text == PASSAGE_EXPECTED
    assert [(c.type, c.name) for c in citations] == [("passage", "harbour.md"), ("City", "Paris")]
    cited = citations[0].model_dump()
    assert cited["kind"] == "passage" and cited["key"] == f"passage:{PASSAGE['id']}"
    assert cited["documentId"] == PASSAGE["document_id"]
    assert cited["snippet"].startswith("The lighthouse of Porto Velho")


def test_a_returned_passage_in_parentheses_is_cited_and_its_id_not_shown():
    text, citations = check_citations(
        "Built in 1871, harbour.md (passage:33333333-3333-3333-3333-333333333333).", known_with_passage()
    )

    assert text == "Built in 1871, harbour.md ."
    assert [(c.type, c.name) for c in citations] == [("passage", "harbour.md")]


def test_every_split_of_a_text_with_passages_gives_the_same_text():
    for cut in range(len(PASSAGE_TEXT) + 1):
        f = CitationFilter(known_with_passage())
        out = f.feed(PASSAGE_TEXT[:cut]) + f.feed(PASSAGE_TEXT[cut:]) + f.flush()
        assert out == PASSAGE_EXPECTED, cut


def test_a_passage_is_never_taken_for_an_entity_nor_an_entity_for_a_passage():
    found = known_with_passage()

    assert found.get(PASSAGE["id"]) is None
    assert found.get("paris", "passage") is None
    assert found.get(PASSAGE["id"], "passage") is not None


def test_passages_learnt_in_a_turn_are_stored_and_known_in_the_next():
    first = known_with_passage()

    later = KnownEntities(first.new)

    assert later.get(PASSAGE["id"], "passage").name == "harbour.md"
    assert later.get("paris").name == "Paris"

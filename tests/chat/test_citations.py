"""Checked citations while streaming: however the text is split into deltas, the result is the same."""

from apps.chat.citations import CitationFilter, KnownEntities, check_citations

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

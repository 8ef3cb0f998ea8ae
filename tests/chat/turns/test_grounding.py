"""Names an answer writes are checked against what the turn's tools returned (issue #47), without a
database: the graph's names are a dictionary here (``entities_named`` is tested over the database
in ``test_invented_names``)."""

from collections.abc import Iterable

import pytest

from apps.chat.turns.citations import KnownEntities
from apps.chat.turns.grounding import LEFT_OUT, Grounding, NameFilter, without_invented

# The graph: every lower-cased name (or alias) with the ids of the entities it names. MetaQA's graph
# holds such words as entities: the films "Yes" and "Following", the tags "film" and "3", the
# rating "good".
GRAPH = {
    "paris": {"e-paris"},
    "berlin": {"e-berlin"},
    "the dark knight": {"e-dark-knight"},
    "scandal sheet": {"e-scandal-sheet"},
    "phil karlson": {"e-karlson"},
    "1911": {"e-1911"},
    "1912": {"e-1912"},
    "yes": {"e-yes"},
    "following": {"e-following"},
    "film": {"e-film"},
    "3": {"e-3"},
    "good": {"e-good"},
    "washington": {"e-washington"},
    "mr. smith goes to washington": {"e-smith"},
}


def lookup(names: Iterable[str]) -> dict[str, set[str]]:
    return {n: GRAPH[n] for n in names if n in GRAPH}


def entity(entity_id: str, name: str) -> dict[str, str]:
    return {"id": entity_id, "key": entity_id, "type": "Thing", "name": name}


def grounding(*returned: dict[str, str], texts: Iterable[str] = ()) -> Grounding:
    """What a turn was given: the entities its tools returned (as the agent's stream adds them)
    and ``texts``."""
    given = Grounding(KnownEntities(), texts)
    for e in returned:
        given.known.add_result(e)
        given.add_result(e)
    return given


def test_a_name_of_the_graph_no_tool_returned_is_left_out_and_one_a_tool_returned_stays():
    given = grounding(entity("e-karlson", "Phil Karlson"), texts=["who directed Scandal Sheet"])
    answer = 'The director of Scandal Sheet, Phil Karlson, is also the director of "The Dark Knight".'

    checked = without_invented(answer, given, lookup)

    assert checked == f'The director of Scandal Sheet, Phil Karlson, is also the director of "{LEFT_OUT}".'


def test_years_no_tool_returned_are_left_out_but_a_count_is_not_a_name():
    given = grounding(entity("e-1912", "1912"))

    checked = without_invented("They were released in 1911, 1912, and 1911: 3 films.", given, lookup)

    assert checked == f"They were released in {LEFT_OUT}, 1912, and {LEFT_OUT}: 3 films."


def test_lower_case_words_and_a_sentence_first_word_are_not_taken_for_names():
    given = grounding()
    answer = "Yes, it is a good film. Following the search, it is good."

    checked = without_invented(answer, given, lookup)

    assert checked == answer


def test_one_word_in_a_list_item_is_taken_for_a_name():
    given = grounding()

    checked = without_invented("Films:\n- Following\n2. Following", given, lookup)

    assert checked == f"Films:\n- {LEFT_OUT}\n2. {LEFT_OUT}"


def test_a_name_a_tool_result_holds_in_its_text_is_grounded_though_no_tool_returned_its_entity():
    given = grounding(texts=['{"description": "Sister city of Berlin"}'])

    checked = without_invented("It is twinned with Berlin, not Paris.", given, lookup)

    assert checked == f"It is twinned with Berlin, not {LEFT_OUT}."


def test_a_part_of_a_returned_name_is_not_checked_alone():
    given = grounding(entity("e-smith", "Mr. Smith Goes to Washington"))

    checked = without_invented("He directed Mr. Smith Goes to Washington.", given, lookup)

    assert checked == "He directed Mr. Smith Goes to Washington."


def test_a_link_is_checked_as_a_citation_not_as_a_name():
    given = grounding()
    answer = "See [Berlin](entity:e-berlin) and Berlin."

    checked = without_invented(answer, given, lookup)

    assert checked == f"See [Berlin](entity:e-berlin) and {LEFT_OUT}."


ANSWER = (
    'The director of Scandal Sheet, Phil Karlson, is also the director of "The Dark Knight" (1911).\n'
    "- **Paris**, Mr. Smith Goes to Washington and [Berlin](entity:e-berlin)\n"
    "Yes: 3 films, 1912 and Berlin"
)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, len(ANSWER)])
async def test_streamed_in_any_pieces_the_name_filter_sends_what_the_whole_text_gives(size):
    given = grounding(entity("e-paris", "Paris"), entity("e-smith", "Mr. Smith Goes to Washington"))
    names = NameFilter(given, lookup)

    sent = [await names.feed(ANSWER[i : i + size]) for i in range(0, len(ANSWER), size)]
    sent.append(await names.flush())

    assert "".join(sent) == without_invented(ANSWER, given, lookup)
    assert "Dark Knight" not in "".join(sent) and "Karlson" not in "".join(sent)


async def test_text_streams_at_once_and_only_a_name_still_being_written_waits():
    names = NameFilter(grounding(), lookup)

    first = await names.feed("The capital is ")
    second = await names.feed("Ber")
    third = await names.feed("lin, not ")
    last = await names.flush()

    assert first == "The capital is "
    assert second == ""
    assert third == f"{LEFT_OUT}, not "
    assert last == ""


async def test_a_comma_ends_a_name_so_a_list_streams_name_by_name():
    returned = grounding(entity("e-paris", "Paris"), entity("e-gbu", "The Good, the Bad and the Ugly"))
    names = NameFilter(returned, lookup)

    first = await names.feed("Paris, ")
    second = await names.feed("Berlin, ")
    third = await names.feed("The Good, the Bad and the Ugly")

    assert (first, second, third) == ("Paris, ", f"{LEFT_OUT}, ", "The Good, the ")
    assert await names.flush() == "Bad and the Ugly"

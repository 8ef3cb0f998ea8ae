"""The offline default's compact answer (issue #48 item 6): relationships by source under a grammar,
no entity list; each name's type read from the graph's relationship types and the mention index, a
name the model confirms proposed as ``create_entity`` and a mention of the graph's entity kept
``link_entity``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.documents.extraction import queue as graph_extraction
from apps.documents.extraction.compact import types_read
from apps.documents.extraction.step import extraction_run_until_idle
from apps.documents.models import ChangeSet, Passage
from apps.documents.services import document_upload
from apps.graph_tools.models import GraphObject
from tests.documents.extraction.atlas import P1, P2, P3, TEXT, TRUE_RELATIONSHIPS, graph_relationships

pytestmark = pytest.mark.django_db

# What the offline default writes for each passage of the Atlas.
COMPACT = {
    P1: {"Fredville": {"CAPITAL_OF": ["Freedonia"]}, "Freedonia": {"USES_CURRENCY": ["Freedonian crown"]}},
    P2: {"Fredville": {"BORDERS": ["Nortown"]}},
    P3: {"Nortown": {"USES_CURRENCY": ["Freedonian crown"]}},
}


def compact(answer: dict[str, Any]) -> str:
    return json.dumps(answer, separators=(",", ":"))


def passage_asked(request: dict[str, Any]) -> str:
    from tests.llm_server import last_user_text

    return last_user_text(request).split("Passage:\n", 1)[1]


def extract(project, settings, respond) -> tuple[Any, list[dict[str, Any]]]:
    from tests.llm_server import LLMTestServer

    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    with LLMTestServer(responder=respond) as server:
        settings.KGCHAT_LOCAL_LLM_URL = server.base_url
        graph_extraction.extraction_start(document=document, model="local/qwen2.5-1.5b", user_id=None)
        extraction_run_until_idle()
    return document, server.requests


def test_the_offline_default_writes_relationships_by_source_and_the_types_are_read_from_the_graph(
    project, settings, owner_client
):
    from tests.llm_server import Stream, text_chunks

    document, requests = extract(
        project, settings, lambda r: Stream(text_chunks(compact(COMPACT[passage_asked(r)])))
    )

    grammar = requests[0]["grammar"]
    # A map of sources to maps of the project's relationship types to lists of targets; no entity list.
    assert '"\\"BORDERS\\"" | "\\"CAPITAL_OF\\"" | "\\"USES_CURRENCY\\""' in grammar
    assert "entities" not in grammar and " space" not in grammar
    system = requests[0]["messages"][0]["content"]
    assert "City -CAPITAL_OF-> Country" in system and "Entity types" not in system
    first = next(r for r in requests if passage_asked(r) == P1)["messages"][-1]["content"]
    assert "Entities of the graph the passage names: Freedonia (Country).\n\nPassage:\n" in first
    change_set = ChangeSet.objects.get(document=document)
    assert change_set.status == "review"
    items = {(i.action, i.values.get("name"), i.values.get("type")) for i in change_set.items.all()}
    # Nortown's type is open in P3 alone (a City or a Country may pay with a currency): P2 gives it.
    assert {i for i in items if i[0] != "create_relationship"} == {
        ("link_entity", "Freedonia", "Country"),
        ("create_entity", "Fredville", "City"),
        ("create_entity", "Freedonian crown", "Currency"),
        ("create_entity", "Nortown", "City"),
    }
    assert (
        change_set.items.get(action="link_entity").entity_id == GraphObject.objects.get(name="Freedonia").id
    )
    assert not GraphObject.objects.filter(project=project, name="Fredville").exists()
    stored = Passage.objects.get(document=document, ordinal=2).extracted
    assert stored == {
        "entities": [{"name": "Freedonian crown", "type": "Currency", "description": ""}],
        "relationships": [{"source": "Nortown", "type": "USES_CURRENCY", "target": "Freedonian crown"}],
    }
    response = owner_client.post(
        f"/api/change-sets/{change_set.id}/decision", {"approve": "all"}, content_type="application/json"
    )
    assert response.status_code == 200, response.json()
    assert graph_relationships(project) >= TRUE_RELATIONSHIPS


def test_a_mention_of_the_graph_s_entity_keeps_its_type_whatever_the_relationships_say(project, settings):
    from tests.llm_server import Stream, text_chunks

    # Written the wrong way round, as if Freedonia were the capital of Fredville.
    answers = {P1: {"Freedonia": {"CAPITAL_OF": ["Fredville"]}}, P2: {}, P3: {}}

    document, _ = extract(
        project, settings, lambda r: Stream(text_chunks(compact(answers[passage_asked(r)])))
    )

    first = Passage.objects.get(document=document, ordinal=0).extracted
    assert {(e["name"], e["type"]) for e in first["entities"]} == {
        ("Freedonia", "Country"),
        ("Fredville", "City"),
    }
    change_set = ChangeSet.objects.get(document=document)
    relationship = change_set.items.get(action="create_relationship")
    source = change_set.items.get(ordinal=relationship.values["source"])
    assert (source.values["name"], relationship.values["type"]) == ("Fredville", "CAPITAL_OF")  # turned round


def test_a_source_written_twice_keeps_both_and_a_loop_is_stopped_keeping_what_came_before(project, settings):
    from tests.llm_server import Stream, text_chunks

    capital = '"Fredville":{"CAPITAL_OF":["Freedonia"]}'
    looping = "{" + capital + ',"Freedonia":{"USES_CURRENCY":["Freedonian crown"]}' + ("," + capital) * 200

    def respond(request: dict[str, Any]) -> Any:
        text = passage_asked(request)
        if text == P1:
            return Stream(
                text_chunks(*[looping[i : i + 9] for i in range(0, len(looping), 9)]), finish_reason="length"
            )
        return Stream(text_chunks(compact(COMPACT[text])))

    document, requests = extract(project, settings, respond)

    assert len([r for r in requests if passage_asked(r) == P1]) == 1  # stopped, not resumed
    first = Passage.objects.get(document=document, ordinal=0)
    assert first.extraction_state == "done"
    assert {(r["source"], r["type"], r["target"]) for r in first.extracted["relationships"]} == {
        ("Fredville", "CAPITAL_OF", "Freedonia"),
        ("Freedonia", "USES_CURRENCY", "Freedonian crown"),
    }


def test_unguided_or_with_new_types_allowed_the_offline_default_is_asked_for_entities_and_relationships(
    project, settings
):
    from tests.documents.extraction.atlas import TRUTH
    from tests.documents.extraction.test_model_answers import rows_of
    from tests.llm_server import Stream, text_chunks

    settings.KGCHAT_EXTRACTION_GUIDED = False

    _, requests = extract(project, settings, lambda r: Stream(text_chunks(rows_of(TRUTH[passage_asked(r)]))))

    assert all('"{\\"entities\\":"' in r["grammar"] for r in requests)


def test_types_are_read_through_the_facts_until_none_narrows():
    relationships = (
        ("LOCATED_IN", "Country", "Continent"),
        ("LOCATED_IN", "City", "Country"),
        ("BORDERS", "Country", "Country"),
        ("SPEAKS", "Country", "Language"),
    )
    facts = [
        {"source": "Hallum", "type": "LOCATED_IN", "target": "Kaben"},  # open until Kaben is known
        {"source": "Kaben", "type": "LOCATED_IN", "target": "Bravontia"},
        {"source": "Kaben", "type": "BORDERS", "target": "Garshaia"},
        {"source": "Morwenpeli", "type": "SPEAKS", "target": "Kaben"},  # turned round
        {"source": "Lone", "type": "LOCATED_IN", "target": "Other"},  # two pairs of types fit: open
    ]

    types = types_read(facts, relationships, {"garshaia": "Country"})

    assert types == {
        "hallum": "City",
        "kaben": "Country",
        "bravontia": "Continent",
        "garshaia": "Country",
        "morwenpeli": "Language",
    }

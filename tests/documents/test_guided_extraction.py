"""Extraction guided by the mentions (issue #48 item 6) is the offline default's compact answer
(``tests/documents/extraction/test_compact_answers.py``); a model that answers without a grammar
(here a scripted one) is asked for entities and relationships, guided or not, and a mention of an
entity of the graph is still ``link_entity``, nothing written until a member approves."""

from __future__ import annotations

from typing import Any

import pytest

from apps.agents.llm.base import ToolCall
from apps.agents.llm.scripted import ScriptedProvider
from apps.documents.extraction.queue import extraction_start
from apps.documents.extraction.spec import TOOL_NAME
from apps.documents.extraction.step import extraction_run_until_idle
from apps.documents.models import ChangeSet
from apps.documents.services import document_upload
from tests.factories import make_entity, make_project, make_relationship

pytestmark = pytest.mark.django_db

TEXT = "Freedonia is a country, and its capital is Fredville.\n"


@pytest.fixture(autouse=True)
def guided(settings):
    settings.KGCHAT_EXTRACTION_GUIDED = True


@pytest.fixture
def project():
    project = make_project(name="Atlas")
    country = make_entity(project, "country:x", type="Country", name="Xland")
    city = make_entity(project, "city:y", type="City", name="Yburg")
    make_relationship(project, city, "CAPITAL_OF", country)
    make_entity(project, "country:freedonia", type="Country", name="Freedonia")
    return project


def scripted(answer: dict[str, Any], asked: list[tuple[list[Any], list[Any]]]) -> ScriptedProvider:
    """A model that answers every passage with ``answer``, noting what it was asked."""

    def respond(messages: list[Any], tools: list[Any]) -> list[Any]:
        asked.append((messages, tools))
        return [ToolCall(id="x", name=TOOL_NAME, arguments=answer)]

    return ScriptedProvider(responder=respond)


def extract(project, answer: dict[str, Any]) -> tuple[ChangeSet, list[tuple[list[Any], list[Any]]]]:
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    asked: list[tuple[list[Any], list[Any]]] = []
    change_set = extraction_start(document=document, model="scripted/x", user_id=None)
    extraction_run_until_idle(provider=scripted(answer, asked))
    change_set.refresh_from_db()
    return change_set, asked


def test_a_model_that_answers_without_a_grammar_is_asked_for_entities_and_a_known_one_is_linked(project):
    answer = {
        "entities": [{"name": "Freedonia", "type": "Country"}, {"name": "Fredville", "type": "City"}],
        "relationships": [{"source": "Fredville", "type": "CAPITAL_OF", "target": "Freedonia"}],
    }

    change_set, asked = extract(project, answer)

    [(messages, tools)] = asked
    assert "Entities of the graph the passage names" not in messages[-1].content
    assert set(tools[0].parameters["properties"]) == {"entities", "relationships"}
    items = {(i.action, i.values.get("name"), i.values.get("type")) for i in change_set.items.all()}
    assert items == {
        ("link_entity", "Freedonia", "Country"),
        ("create_entity", "Fredville", "City"),
        ("create_relationship", None, "CAPITAL_OF"),
    }


def test_unguided_the_prompt_names_nothing_and_the_mention_is_still_linked(project, settings):
    settings.KGCHAT_EXTRACTION_GUIDED = False
    answer = {"entities": [{"name": "Freedonia", "type": "Country"}], "relationships": []}

    change_set, asked = extract(project, answer)

    [(messages, tools)] = asked
    assert "Entities of the graph the passage names" not in messages[-1].content
    assert "enum" not in tools[0].parameters["properties"]["entities"]["items"]["properties"]["name"]
    [item] = change_set.items.all()
    assert (item.action, item.values["name"]) == ("link_entity", "Freedonia")

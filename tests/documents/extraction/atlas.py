"""The Atlas project the extraction tests share: three passages about Freedonia (``TEXT``), what a perfect
extractor says of each (``TRUTH``), the project with the types its schema's enums come from, its
owner's client, and starting an extraction through the API."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from apps.agents.llm.base import ToolCall
from apps.agents.llm.scripted import ScriptedProvider
from apps.documents.extraction.spec import TOOL_NAME
from apps.graph_tools.models import GraphRelationship
from tests.factories import make_entity, make_project, make_relationship, make_user

P1 = "Freedonia is a country whose capital is Fredville. Its currency is the Freedonian crown."
P2 = "Fredville lies on the river Fred, and the city also borders the town of Nortown."
P3 = "Nortown uses the Freedonian crown as well."
TEXT = "\n\n".join([P1, P2, P3]) + "\n"
# The truth per passage: what a perfect extractor says.
TRUTH: dict[str, dict[str, list[dict[str, str]]]] = {
    P1: {
        "entities": [
            {"name": "Freedonia", "type": "Country", "description": "A country."},
            {"name": "Fredville", "type": "City", "description": "The capital of Freedonia."},
            {"name": "Freedonian crown", "type": "Currency", "description": "Freedonia's currency."},
        ],
        "relationships": [
            {"source": "Fredville", "type": "CAPITAL_OF", "target": "Freedonia"},
            {"source": "Freedonia", "type": "USES_CURRENCY", "target": "Freedonian crown"},
        ],
    },
    P2: {
        "entities": [
            {"name": "Fredville", "type": "City", "description": "A city on the river Fred."},
            {"name": "Nortown", "type": "City", "description": "A town."},
        ],
        "relationships": [{"source": "Fredville", "type": "BORDERS", "target": "Nortown"}],
    },
    P3: {
        "entities": [
            {"name": "Nortown", "type": "City", "description": "A town."},
            {"name": "Freedonian crown", "type": "Currency", "description": "A currency."},
        ],
        "relationships": [{"source": "Nortown", "type": "USES_CURRENCY", "target": "Freedonian crown"}],
    },
}
TRUE_RELATIONSHIPS = {
    ("Fredville", "CAPITAL_OF", "Freedonia"),
    ("Freedonia", "USES_CURRENCY", "Freedonian crown"),
    ("Fredville", "BORDERS", "Nortown"),
    ("Nortown", "USES_CURRENCY", "Freedonian crown"),
}


def passage_of(messages: list[Any]) -> str:
    return re.search(r"Passage:\n(.*)$", messages[-1].content, re.DOTALL).group(1)  # type: ignore[union-attr]


def perfect_extractor(truth: dict[str, Any] = TRUTH) -> ScriptedProvider:
    """Answers every passage with exactly its facts, through the one tool it is offered."""

    def respond(messages: list[Any], tools: list[Any]) -> list[Any]:
        assert [t.name for t in tools] == [TOOL_NAME]
        return [ToolCall(id="x", name=TOOL_NAME, arguments=truth[passage_of(messages)])]

    return ScriptedProvider(responder=respond)


@pytest.fixture
def project():
    owner = make_user("owner")
    project = make_project(owner=owner, name="Atlas")
    # The project's types: the schema's enums come from them.
    a = make_entity(project, "country:x", type="Country", name="Xland")
    b = make_entity(project, "city:y", type="City", name="Yburg")
    c = make_entity(project, "currency:z", type="Currency", name="Zed")
    make_relationship(project, b, "CAPITAL_OF", a)
    make_relationship(project, a, "USES_CURRENCY", c)
    make_relationship(project, b, "USES_CURRENCY", c)  # a city may pay with a currency too
    make_relationship(project, b, "BORDERS", b)
    make_entity(project, "country:freedonia", type="Country", name="Freedonia", description="Already known.")
    return project


@pytest.fixture
def owner_client(project):
    client = Client()
    client.force_login(project.memberships.get().user)
    return client


def start(client, project, document) -> dict[str, Any]:
    response = client.post(f"/api/projects/{project.id}/documents/{document.id}/extraction")
    assert response.status_code == 202, response.json()
    return response.json()


def graph_relationships(project) -> set[tuple[str, str, str]]:
    return {
        (r.src.name, r.type, r.dst.name)
        for r in GraphRelationship.objects.filter(project=project).select_related("src", "dst")
    }

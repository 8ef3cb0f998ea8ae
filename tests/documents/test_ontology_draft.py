"""An ontology proposed from a sample of the project's documents, as a reviewable draft (#51):
requested over REST (the model through ``apps.agents.structured``, here a scripted one), read,
mended where the model strayed, accepted (an import), refused once the project has an ontology."""

from __future__ import annotations

import pytest

from apps.agents.llm.scripted import tool_call
from apps.documents.ontology_draft import TOOL_NAME
from apps.documents.services import document_upload

pytestmark = pytest.mark.django_db

TEXT = "Ada Lovelace was born in London in 1815.\n\nShe worked with Charles Babbage in London.\n"
ANSWER = {
    "entity_types": [
        {"name": "Person", "description": "A human being"},
        {"name": "City", "description": "A town"},
    ],
    "relationship_types": [
        {"name": "born in", "domain": "Person", "range": "City"},
        {"name": "WORKED_WITH", "domain": "Person", "range": "Person"},
        {"name": "LOCATED_IN", "domain": "City", "range": "Country"},
    ],
    "properties": [
        {"type": "Person", "name": "birth_year", "datatype": "integer"},
        {"type": "Planet", "name": "mass", "datatype": "number"},
    ],
}


def test_a_draft_is_proposed_from_the_documents_reviewed_and_accepted(editor, scripted):
    client, project = editor
    document_upload(project=project, name="ada.md", data=TEXT.encode())
    scripted.turns.append([tool_call(TOOL_NAME, ANSWER)])
    url = f"/api/projects/{project.id}/ontology"

    proposed = client.post(f"{url}/draft")
    read = client.get(f"{url}/draft")
    accepted = client.post(f"{url}/draft/accept")
    again = client.post(f"{url}/draft")

    assert proposed.status_code == 201, proposed.content
    draft = proposed.json()["draft"]
    assert draft["relationship_types"]["BORN_IN"] == {"domain": ["Person"], "range": ["City"]}
    assert draft["relationship_types"]["LOCATED_IN"] == {"domain": ["City"]}  # Country is no type of it
    assert "Country" not in draft["entity_types"]
    assert draft["entity_types"]["Person"]["properties"] == {"birth_year": "integer"}
    assert "Country" in proposed.json()["notes"] and "mass" in proposed.json()["notes"]
    asked = scripted.calls[0].messages[-1].content
    assert "Ada Lovelace was born in London" in asked
    assert read.json()["draft"] == draft
    assert accepted.status_code == 200
    assert accepted.json()["ontology"]["relationship_types"]["WORKED_WITH"]["range"] == ["Person"]
    assert client.get(f"{url}/draft").status_code == 404
    assert (again.status_code, again.json()["code"]) == (409, "ontology_exists")


def test_a_draft_needs_documents_and_an_editor(editor, scripted):
    client, project = editor

    nothing = client.post(f"/api/projects/{project.id}/ontology/draft")
    discard = client.delete(f"/api/projects/{project.id}/ontology/draft")

    assert (nothing.status_code, nothing.json()["code"]) == (409, "no_documents")
    assert (discard.status_code, discard.json()["code"]) == (404, "ontology_not_found")
    assert scripted.calls == []

"""Extraction's JSON Schema follows the project's imported ontology (#51): the model's answer enums
are the ontology's types (not the graph's, whatever allow_new_types says), and the prompt lists its
relationships with their domains and ranges."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.documents.extraction import queue as graph_extraction
from apps.documents.extraction.spec import extraction_spec
from apps.documents.extraction.step import extraction_run_until_idle
from apps.documents.models import ExtractionSettings
from apps.documents.services import document_upload
from apps.graph_tools.ontology.formats import ontology_read
from apps.graph_tools.ontology.services import ontology_store
from tests.documents.extraction.atlas import TEXT, TRUTH

pytestmark = pytest.mark.django_db

ONTOLOGY = b"""
entity_types: {City: {}, Country: {}, Currency: {}, River: {properties: {length_km: number}}}
relationship_types:
  CAPITAL_OF: {domain: [City], range: [Country]}
  USES_CURRENCY: {domain: [Country, City], range: [Currency]}
  FLOWS_THROUGH: {domain: [River], range: [City, Country]}
"""


def test_extractions_schema_follows_an_imported_ontology(project, settings):
    from tests.llm_server import LLMTestServer, Stream, last_user_text, text_chunks

    ExtractionSettings.objects.create(project=project, allow_new_types=True)
    ontology_store(project_id=project.id, ontology=ontology_read(ONTOLOGY, "yaml"), user_id=None)
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    systems: list[str] = []

    def respond(request: dict[str, Any]) -> Any:
        systems.append(request["messages"][0]["content"])
        text = last_user_text(request).split("Passage:\n", 1)[1]
        return Stream(text_chunks(json.dumps(TRUTH[text])))

    spec = extraction_spec(project_id=project.id)
    with LLMTestServer(responder=respond) as server:
        settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = server.base_url, "test-key"
        graph_extraction.extraction_start(document=document, model="openai/test-model", user_id=None)
        extraction_run_until_idle()

    assert spec.free_types is False
    schema = server.requests[0]["response_format"]["json_schema"]["schema"]
    entity_type = schema["properties"]["entities"]["items"]["properties"]["type"]
    relationship_type = schema["properties"]["relationships"]["items"]["properties"]["type"]
    assert entity_type["enum"] == ["City", "Country", "Currency", "River"]
    assert relationship_type["enum"] == ["CAPITAL_OF", "FLOWS_THROUGH", "USES_CURRENCY"]
    assert "BORDERS" not in relationship_type["enum"]  # the graph has it; the ontology does not
    assert "River -FLOWS_THROUGH-> City" in systems[0]
    assert "You may use other types" not in systems[0]

"""An extraction answer under the project's schema and checked against its passage: the schema names
the project's types (new types only with the setting), an answer is checked against the passage it
was read from, a relationship joining types the graph never joins needs new types allowed, a name
typed differently takes the type its passages agree on, a relationship turned round is read by the
graph's types; a near name is proposed as a merge, and a merged mention's name is kept as an alias."""

from __future__ import annotations

from typing import Any

import pytest

from apps.documents import resolution
from apps.documents.extraction import queue as graph_extraction
from apps.documents.extraction.answers import extraction_output_clean
from apps.documents.extraction.spec import extraction_spec
from apps.documents.extraction.step import extraction_run_until_idle
from apps.documents.models import ChangeSet, ChangeSetItem, Document, ExtractionSettings, Passage
from apps.documents.review import change_set_apply
from apps.documents.services import document_upload
from apps.graph_tools.models import GraphChange, GraphObject
from apps.graph_tools.versions import graph_version_current
from tests.documents.extraction.atlas import (
    P1,
    P2,
    P3,
    TEXT,
    TRUE_RELATIONSHIPS,
    TRUTH,
    graph_relationships,
    perfect_extractor,
    start,
)
from tests.factories import make_entity

pytestmark = pytest.mark.django_db


def test_the_schema_names_the_project_types_and_new_types_need_the_setting(project):
    spec = extraction_spec(project_id=project.id)
    answer = {
        "entities": [{"name": "Ann", "type": "Person", "description": ""}, {"name": "Oz", "type": "Country"}],
        "relationships": [{"source": "Ann", "type": "LIVES_IN", "target": "Oz"}],
    }

    cleaned = extraction_output_clean(answer, spec)
    ExtractionSettings.objects.create(project=project, allow_new_types=True)
    free = extraction_spec(project_id=project.id)

    entity_type = spec.schema["properties"]["entities"]["items"]["properties"]["type"]
    assert entity_type["enum"] == ["City", "Country", "Currency"]
    assert spec.schema["properties"]["relationships"]["items"]["properties"]["type"]["enum"] == [
        "BORDERS",
        "CAPITAL_OF",
        "USES_CURRENCY",
    ]
    assert cleaned == {
        "entities": [{"name": "Oz", "type": "Country", "description": ""}],
        "relationships": [],
    }
    assert "enum" not in free.schema["properties"]["entities"]["items"]["properties"]["type"]
    assert len(extraction_output_clean(answer, free)["entities"]) == 2


def test_the_answer_is_checked_against_the_passage_it_was_read_from(project):
    spec = extraction_spec(project_id=project.id)
    text = "Freedonia is a country, and its capital is Fredville. The country pays with the Freedonian crown."
    answer = {
        "entities": [
            {"name": "Freedonia", "type": "Country"},
            {"name": "Fredvile", "type": "City"},  # misspelt
            {"name": "Freedonian crown", "type": "Currency"},
            {"name": "Sylvania", "type": "Country"},  # not in the passage
            {"name": "its capital", "type": "City"},  # a reference, not a name
            {"name": "Country", "type": "Country"},  # the passage's common noun: a type, not a name
        ],
        "relationships": [
            {"source": "Fredvile", "type": "CAPITAL_OF", "target": "Freedonia"},
            {"source": "the country", "type": "USES_CURRENCY", "target": "Freedonian crown"},
            {"source": "Sylvania", "type": "BORDERS", "target": "Freedonia"},
            {"source": "Freedonia", "type": "BORDERS", "target": "Country"},
        ],
    }

    cleaned = extraction_output_clean(answer, spec, text=text)

    assert [(e["name"], e["type"]) for e in cleaned["entities"]] == [
        ("Freedonia", "Country"),
        ("Fredville", "City"),
        ("Freedonian crown", "Currency"),
    ]
    assert cleaned["relationships"] == [
        {"source": "Fredville", "type": "CAPITAL_OF", "target": "Freedonia"},
        {"source": "Freedonia", "type": "USES_CURRENCY", "target": "Freedonian crown"},
    ]


def test_a_relationship_joining_types_the_graph_never_joins_needs_new_types_allowed(project, owner_client):
    truth = {
        P1: {
            "entities": [
                {"name": "Freedonia", "type": "Country"},
                {"name": "Freedonian crown", "type": "Currency"},
            ],
            # BORDERS joins two cities in the graph, never a country and a currency.
            "relationships": [{"source": "Freedonia", "type": "BORDERS", "target": "Freedonian crown"}],
        },
        P2: {"entities": [], "relationships": []},
        P3: {"entities": [], "relationships": []},
    }
    strict = document_upload(project=project, name="strict.md", data=TEXT.encode()).document
    start(owner_client, project, strict)
    extraction_run_until_idle(provider=perfect_extractor(truth))
    ExtractionSettings.objects.create(project=project, allow_new_types=True)
    free = document_upload(project=project, name="free.md", data=TEXT.encode()).document
    start(owner_client, project, free)
    extraction_run_until_idle(provider=perfect_extractor(truth))

    def relationship_items(document: Document) -> list[dict[str, Any]]:
        change_set = ChangeSet.objects.get(document=document)
        items = ChangeSetItem.objects.filter(change_set=change_set, action="create_relationship")
        return [i.values for i in items]

    assert relationship_items(strict) == []
    assert [v["type"] for v in relationship_items(free)] == ["BORDERS"]


def test_a_name_typed_differently_in_two_passages_takes_the_type_its_passages_and_relationships_agree_on(
    project, owner_client
):
    # The first passage types Fredville as a country; the second, and every relationship of it
    # (the capital of a country, bordering a city), as a city.
    mistyped = {
        **TRUTH,
        P1: {
            **TRUTH[P1],
            "entities": [
                {"name": "Freedonia", "type": "Country"},
                {"name": "Fredville", "type": "Country"},
                {"name": "Freedonian crown", "type": "Currency"},
            ],
        },
    }
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    extraction_run_until_idle(provider=perfect_extractor(mistyped))
    before = graph_relationships(project)

    change_set = ChangeSet.objects.get(document=document)
    change_set_apply(change_set_id=change_set.id, approve=None, reject=[], edits={}, user_id=None)

    fredville = ChangeSetItem.objects.get(change_set=change_set, values__name="Fredville")
    assert fredville.values["type"] == "City"
    assert graph_relationships(project) - before == TRUE_RELATIONSHIPS


def test_a_relationship_turned_round_or_naming_an_unlisted_end_is_read_by_the_graph_s_types(project):
    sloppy = {
        P1: {
            "entities": [
                {"name": "Freedonia", "type": "Country", "description": ""},
                {"name": "Fredville", "type": "City", "description": ""},
            ],
            "relationships": [
                {"source": "Freedonia", "type": "CAPITAL_OF", "target": "Fredville"},
                {"source": "Freedonia", "type": "USES_CURRENCY", "target": "Freedonian crown"},
            ],
        },
        P2: {"entities": [], "relationships": []},
        P3: {"entities": [], "relationships": []},
    }
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document

    graph_extraction.extraction_start(document=document, model="scripted/x", user_id=None)
    extraction_run_until_idle(provider=perfect_extractor(sloppy))

    items = list(ChangeSet.objects.get(document=document).items.order_by("ordinal"))
    names = {i.ordinal: i.values.get("name") for i in items}
    relationships = {
        (names[i.values["source"]], i.values["type"], names[i.values["target"]])
        for i in items
        if i.action == "create_relationship"
    }
    assert relationships == {
        ("Fredville", "CAPITAL_OF", "Freedonia"),
        ("Freedonia", "USES_CURRENCY", "Freedonian crown"),
    }
    crown = next(i for i in items if i.values.get("name") == "Freedonian crown")
    assert (crown.action, crown.values["type"]) == ("create_entity", "Currency")


def test_a_near_name_is_proposed_as_a_merge_with_its_evidence(project):
    make_entity(project, "city:porto-velho", type="City", name="Porto Velho")

    action, evidence = resolution.entity_match(project_id=project.id, name="Porto Velhos", type_="City")

    assert action == "merge"
    assert evidence["method"] == "trigram" and evidence["entity"]["name"] == "Porto Velho"
    assert evidence["score"] >= resolution.TRIGRAM_MERGE


MISSPELT = "Fredonia's capital is Fredville."
MISSPELT_TRUTH = {
    MISSPELT: {
        "entities": [
            {"name": "Fredonia", "type": "Country", "description": "A country."},
            {"name": "Fredville", "type": "City", "description": "Its capital."},
        ],
        "relationships": [{"source": "Fredville", "type": "CAPITAL_OF", "target": "Fredonia"}],
    }
}


def test_a_merged_mention_s_name_is_kept_as_an_alias_and_the_next_mention_of_it_is_linked(
    project, owner_client
):
    document = document_upload(project=project, name="fredonia.md", data=MISSPELT.encode()).document
    start(owner_client, project, document)
    extraction_run_until_idle(provider=perfect_extractor(MISSPELT_TRUTH))
    review = owner_client.get(f"/api/projects/{project.id}/documents/{document.id}/extraction").json()
    version = graph_version_current(project_id=project.id)

    decided = owner_client.post(
        f"/api/change-sets/{review['id']}/decision", {"approve": "all"}, content_type="application/json"
    )

    merge = next(i for i in review["items"] if i["action"] == "merge_entity")
    assert merge["values"]["name"] == "Fredonia" and merge["evidence"]["entity"]["name"] == "Freedonia"
    assert decided.status_code == 200, decided.json()
    freedonia = GraphObject.objects.get(project=project, key="country:freedonia")
    assert freedonia.name == "Freedonia" and freedonia.properties["aliases"] == ["Fredonia"]
    assert (
        GraphObject.objects.filter(project=project, type="Country", name__icontains="fredonia").count() == 0
    )
    (alias_change,) = GraphChange.objects.filter(project=project, version=version + 1, action="update_entity")
    assert alias_change.entity_id == freedonia.id and alias_change.document_id == document.id
    assert alias_change.passage_id == Passage.objects.get(document=document).id
    assert alias_change.after["properties"]["aliases"] == ["Fredonia"]

    action, evidence = resolution.entity_match(project_id=project.id, name="Fredonia", type_="Country")
    assert (action, evidence["method"], evidence["entity"]["name"]) == ("link", "alias", "Freedonia")

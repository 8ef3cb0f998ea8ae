"""The graph REST routes: import (PROTOCOL §5b: upsert by key, all or nothing, the failing line
reported) and browsing entities by type, text, id or key."""

import json

import pytest
from django.test import Client

from apps.graph_tools.embeddings import EMBED_TEXT_CHARS, entity_text, pending_batch_embed
from apps.graph_tools.models import GraphObject, GraphRelationship
from tests.factories import make_entity, make_project, make_relationship, make_user
from tests.graph_tools.records import ALICE, BOB, KNOWS, jsonl

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner_client():
    user = make_user()
    project = make_project(owner=user)
    client = Client()
    client.force_login(user)
    return client, project


def post_import(client, project, body):
    return client.post(f"/api/projects/{project.id}/graph/import", body, content_type="application/x-ndjson")


def test_import_creates_entities_and_relationships(owner_client):
    client, project = owner_client

    response = post_import(client, project, jsonl(ALICE, BOB, KNOWS))

    assert response.status_code == 200
    counts = response.json()
    counts.pop("entitiesEmbedded")
    assert counts.pop("embedding")["pending"] == 2
    assert counts == {
        "entitiesCreated": 2,
        "entitiesUpdated": 0,
        "relationshipsCreated": 1,
        "relationshipsUpdated": 0,
        "graphVersion": 1,
    }
    alice = GraphObject.objects.get(project=project, key="alice")
    assert (alice.type, alice.name, alice.properties) == ("Person", "Alice", {"born": 1990})
    rel = GraphRelationship.objects.get(project=project)
    assert (rel.src.key, rel.type, rel.dst.key, rel.properties) == ("alice", "KNOWS", "bob", {"since": 2010})


def test_reimport_same_key_updates_the_entity(owner_client):
    client, project = owner_client
    post_import(client, project, jsonl(ALICE, BOB, KNOWS))

    response = post_import(
        client, project, jsonl({**ALICE, "name": "Alice Smith"}, {**KNOWS, "properties": {}})
    )

    counts = response.json()
    counts.pop("entitiesEmbedded")
    counts.pop("embedding")
    assert counts == {
        "entitiesCreated": 0,
        "entitiesUpdated": 1,
        "relationshipsCreated": 0,
        "relationshipsUpdated": 1,
        "graphVersion": 2,
    }
    assert GraphObject.objects.filter(project=project).count() == 2
    assert GraphObject.objects.get(project=project, key="alice").name == "Alice Smith"
    assert GraphRelationship.objects.get(project=project).properties == {}


def test_relationship_may_refer_to_entities_already_in_the_project(owner_client):
    client, project = owner_client
    post_import(client, project, jsonl(ALICE, BOB))

    response = post_import(client, project, jsonl(KNOWS))

    assert response.json()["relationshipsCreated"] == 1


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        ("{not json", "invalid JSON"),
        (json.dumps({"kind": "relationship", "type": "KNOWS", "src": "alice", "dst": "nobody"}), "nobody"),
        (json.dumps({"kind": "entity", "key": "carol", "type": "Person"}), "'name'"),
        (json.dumps({"kind": "entity", "type": "Person", "name": "No key"}), "'key'"),
        (json.dumps({"key": "x", "type": "T", "name": "X"}), "'kind'"),
        (json.dumps([1, 2]), "JSON object"),
        (json.dumps({**BOB, "properties": [1]}), "properties"),
    ],
    ids=[
        "bad-json",
        "unknown-relationship-key",
        "missing-name",
        "missing-key",
        "missing-kind",
        "not-object",
        "properties-not-object",
    ],
)
def test_invalid_line_rejects_the_whole_import_with_its_line_number(owner_client, bad_line, reason):
    client, project = owner_client
    body = jsonl(ALICE, BOB) + "\n" + bad_line + "\n" + jsonl(KNOWS)

    response = post_import(client, project, body)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_import"
    assert response.json()["line"] == 3
    assert response.json()["error"].startswith("line 3:")
    assert reason in response.json()["error"]
    assert not GraphObject.objects.filter(project=project).exists()
    assert not GraphRelationship.objects.filter(project=project).exists()


def test_failed_reimport_keeps_the_previous_graph_unchanged(owner_client):
    client, project = owner_client
    post_import(client, project, jsonl(ALICE, BOB, KNOWS))

    response = post_import(client, project, jsonl({**ALICE, "name": "Changed"}, {**KNOWS, "dst": "ghost"}))

    assert response.status_code == 400
    assert GraphObject.objects.get(project=project, key="alice").name == "Alice"


def test_entities_browse_filters_by_type_and_text(owner_client):
    client, project = owner_client
    make_entity(project, "paris", type="City", name="Paris")
    make_entity(project, "france", type="Country", name="France")
    make_entity(project, "lyon", type="City", name="Lyon")

    cities = client.get(f"/api/projects/{project.id}/graph/entities?type=City").json()
    found = client.get(f"/api/projects/{project.id}/graph/entities?q=fran").json()

    assert cities["count"] == 2
    assert [e["name"] for e in cities["items"]] == ["Lyon", "Paris"]
    assert [e["key"] for e in found["items"]] == ["france"]
    assert set(found["items"][0]) == {
        "id",
        "key",
        "type",
        "name",
        "description",
        "properties",
        "createdAt",
        "updatedAt",
    }


def test_entity_by_id_or_key_has_its_edges(owner_client):
    client, project = owner_client
    paris = make_entity(project, "paris", type="City", name="Paris")
    france = make_entity(project, "france", type="Country", name="France")
    make_relationship(project, paris, "CAPITAL_OF", france)

    by_key = client.get(f"/api/projects/{project.id}/graph/entities/paris").json()
    by_id = client.get(f"/api/projects/{project.id}/graph/entities/{france.id}").json()
    missing = client.get(f"/api/projects/{project.id}/graph/entities/nowhere")

    assert [(e["type"], e["direction"], e["other"]["key"]) for e in by_key["edges"]] == [
        ("CAPITAL_OF", "out", "france")
    ]
    assert [(e["type"], e["direction"], e["other"]["key"]) for e in by_id["edges"]] == [
        ("CAPITAL_OF", "in", "paris")
    ]
    assert missing.status_code == 404


# --- issue #11: bad input in an import answers 400 invalid_import with the line, never 500 -----


@pytest.mark.parametrize(
    ("second_line", "reason"),
    [
        (
            b'{"kind": "entity", "key": "eve", "type": "P", "name": "Eve", "properties": '
            + b"[" * 10_000
            + b"]" * 10_000
            + b"}",
            "nested",
        ),
        (b'{"kind": "entity", "key": "eve", "type": "P", "name": "Eve \xff\xfe"}', "invalid JSON"),
        (b'{"kind": "entity", "key": "eve", "type": "P", "name": "Eve\\u0000"}', "NUL"),
        (b'{"kind": "entity", "key": "eve", "type": "P", "name": "Eve\\ud800"}', "surrogate"),
        (
            b'{"kind": "entity", "key": "eve", "type": "P", "name": "Eve", "properties": {"a\\u0000": 1}}',
            "NUL",
        ),
    ],
    ids=["nested-10000-deep", "invalid-utf8", "nul", "lone-surrogate", "nul-in-a-property-key"],
)
def test_deep_nesting_invalid_utf8_nul_and_surrogates_in_an_import_are_invalid_import_with_the_line(
    owner_client, second_line, reason
):
    client, project = owner_client
    body = json.dumps(ALICE).encode() + b"\n" + second_line + b"\n" + json.dumps(BOB).encode()

    response = post_import(client, project, body)

    assert response.status_code == 400
    error = response.json()
    assert error["code"] == "invalid_import"
    assert error["line"] == 2
    assert reason in error["error"]
    assert not GraphObject.objects.filter(project=project).exists()


@pytest.mark.django_db(transaction=True)  # committed, so the embedding thread sees the entities
def test_a_200000_word_description_is_stored_whole_and_searchable_by_its_beginning(owner_client):
    client, project = owner_client
    words = [f"w{n:06d}x" for n in range(200_000)]  # 2 MB of distinct lexemes: over tsvector's 1 MB
    long_one = {**ALICE, "description": "Zanzibarian clockmaker. " + " ".join(words)}

    response = post_import(client, project, jsonl(long_one, BOB))
    search = client.post(
        f"/api/projects/{project.id}/graph/tools/search_entities",
        {"query": "clockmaker"},
        content_type="application/json",
    )
    tail = client.post(
        f"/api/projects/{project.id}/graph/tools/search_entities",
        {"query": words[-1]},
        content_type="application/json",
    )

    assert response.status_code == 200, response.content[:300]
    assert response.json()["entitiesCreated"] == 2
    assert response.json()["embedding"]["pending"] == 2
    assert (
        pending_batch_embed(project_id=project.id) == 2
    )  # the embedder reads the first EMBED_TEXT_CHARS only
    assert (
        len(entity_text(name="Alice", type="Person", description=long_one["description"])) == EMBED_TEXT_CHARS
    )
    assert GraphObject.objects.get(project=project, key="alice").description == long_one["description"]
    assert [r["key"] for r in search.json()["results"]] == ["alice"]
    assert tail.json()["results"] == []

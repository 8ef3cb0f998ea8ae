"""Full-text search reads the words inside angle brackets (#47 item 2): names, descriptions and
passages holding ``<…>`` are found by those words at once, before any vector exists (no embedding
worker runs here), and a query holding ``<…>`` means its words too."""

from __future__ import annotations

import io

import pytest
from django.db import connection
from django.test import Client

from apps.documents.models import Passage
from apps.graph_tools.models import GraphObjectEmbedding
from apps.graph_tools.text_search import tsvector_sql, websearch_tsquery_sql
from tests.factories import make_entity, make_project, make_user
from tests.graph_tools.conftest import call_tool

pytestmark = pytest.mark.django_db

# (key, name, description, a query with none of the name as a substring, found only by its words)
MARKUP = [
    ("list", "List<String>", "A container type", "strings"),
    ("vec", "Vec<T>", "A growable array", "Vec<T>"),
    ("bold", "<b>Type</b>", "Bold markup", "types"),
    ("abc", "a<b>c", "Letters", "b c"),
    ("img", '<img src="x" onerror="alert(1)">', "An injection attempt", "alert img"),
    ("code", "Parts guide", "Call Optional<Sprocket> when the part may be missing.", "optional sprocket"),
]
CODE = b"# Parts\n\nKeep the parts in a List<Gizmo> and sort them.\n\nNothing else here.\n"


@pytest.fixture
def markup_project():
    project = make_project(owner=make_user())
    for key, name, description, _ in MARKUP:
        make_entity(project, key, type="Type", name=name, description=description)
    make_entity(project, "shopping", type="Type", name="Shopping list", description="Groceries")
    return project


def found(project, tool: str, query: str) -> list[str]:
    return [r["key"] for r in call_tool(project, tool, query=query, limit=20)["results"]]


@pytest.mark.parametrize("tool", ["search_entities", "hybrid_search"])
def test_entities_are_found_by_the_words_inside_angle_brackets(markup_project, tool):
    results = {key: found(markup_project, tool, query) for key, _, _, query in MARKUP}

    assert {key: keys[:1] for key, keys in results.items()} == {key: [key] for key in results}
    assert not GraphObjectEmbedding.objects.filter(project=markup_project).exists()


def test_a_quoted_query_in_angle_brackets_is_a_phrase_of_its_words(markup_project):
    phrase = found(markup_project, "search_entities", '"List<String>"')

    assert phrase == ["list"]


def test_a_passage_quoting_code_is_found_by_the_words_inside_its_angle_brackets():
    user = make_user()
    project = make_project(owner=user)
    client = Client()
    client.force_login(user)
    file = io.BytesIO(CODE)
    file.name = "parts.md"
    assert client.post(f"/api/projects/{project.id}/documents", {"file": file}).status_code == 201

    result = call_tool(project, "search_passages", query="gizmos")

    assert [r["text"] for r in result["results"]] == ["Keep the parts in a List<Gizmo> and sort them."]
    assert result["embedding"] == {"pending": Passage.objects.filter(project=project).count()}


def test_every_stored_search_vector_and_index_reads_text_through_kb_search_text():
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT c.relname, pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d
               JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
               JOIN pg_class c ON c.oid = d.adrelid
               WHERE c.relnamespace = 'kb'::regnamespace AND a.attname = 'search_vector'
               UNION ALL
               SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'kb' AND indexdef LIKE '%to_tsvector%'"""
        )
        stored = dict(cursor.fetchall())
        cursor.execute(
            f"SELECT {tsvector_sql(repr('List<String>'))} @@ {websearch_tsquery_sql(repr('string'))}"
        )
        (matches,) = cursor.fetchone()

    assert set(stored) == {"graph_objects", "document_passages", "chat_messages", "chat_conv_title_fts"}
    assert {
        name: expression.count("to_tsvector(") == expression.count("kb.search_text(")
        for name, expression in stored.items()
    } == dict.fromkeys(stored, True)
    assert matches is True

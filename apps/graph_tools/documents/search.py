"""Search a project's passages: full text (any of the query's words, best first) fused with vector
similarity (reciprocal-rank fusion, as ``hybrid_search`` fuses for entities)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from apps.graph_tools.embeddings import Embedder
from apps.graph_tools.search import HNSW_EF_SEARCH, RRF_K, vector_literal, vector_search_options_set
from apps.graph_tools.text_search import any_word_tsquery_sql

# Candidates each ranking contributes to the fusion.
CANDIDATES = 50

PASSAGE_COLUMNS = "p.id, p.document_id, d.name, p.ordinal, p.page, p.char_start, p.char_end, p.text"


def passage_row(row: Sequence[Any]) -> dict[str, Any]:
    """``PASSAGE_COLUMNS`` as the tools show a passage (no ``key`` or ``type``: it is not an entity)."""
    return {
        "id": str(row[0]),
        "document_id": str(row[1]),
        "document_name": row[2],
        "ordinal": row[3],
        "page": row[4],
        "char_start": row[5],
        "char_end": row[6],
        "text": row[7],
    }


def passages_search(
    *,
    project_id: uuid.UUID,
    query: str,
    limit: int,
    embedder: Embedder | None = None,
    query_vector: Sequence[float] | None = None,
    document_id: uuid.UUID | None = None,
) -> list[dict[str, Any]]:
    """The project's passages best matching ``query``, each with its document and a ``score``.

    Full text matches any of the query's words (a question's words rarely all occur in one
    passage), ranked by cover density; with ``query_vector`` the passages embedded by
    ``embedder``'s model are ranked by cosine distance too, and the two rankings fused.
    """
    params: dict[str, Any] = {
        "project": project_id,
        "q": query,
        "candidates": CANDIDATES,
        "limit": limit,
        "rrf": RRF_K,
    }
    document = ""
    if document_id is not None:
        document, params["document"] = " AND p.document_id = %(document)s", document_id
    vector_branch = ""
    if embedder is not None and query_vector is not None:
        params["vec"] = vector_literal(query_vector)
        params["model"] = embedder.name
        vector_branch = "UNION ALL " + _nearest(embedder, document_id is not None)
    sql = f"""
        WITH q AS (SELECT {any_word_tsquery_sql("%(q)s")} AS query),
        ranked AS (
            SELECT id, row_number() OVER (ORDER BY rank DESC, id) AS r FROM (
                SELECT p.id, ts_rank_cd(p.search_vector, q.query) AS rank
                FROM kb.document_passages p, q
                WHERE p.project_id = %(project)s AND p.search_vector @@ q.query{document}
                ORDER BY rank DESC LIMIT %(candidates)s
            ) text_matches
            {vector_branch}
        ),
        fused AS (SELECT id, sum(1.0 / (%(rrf)s + r)) AS score FROM ranked GROUP BY id)
        SELECT {PASSAGE_COLUMNS}, f.score
        FROM fused f JOIN kb.document_passages p ON p.id = f.id JOIN kb.documents d ON d.id = p.document_id
        ORDER BY f.score DESC, p.id LIMIT %(limit)s
    """
    with transaction.atomic(), connection.cursor() as cursor:
        if vector_branch:
            vector_search_options_set(cursor, max(HNSW_EF_SEARCH, CANDIDATES))
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [{**passage_row(row), "score": round(float(row[8]), 6)} for row in rows]


def _nearest(embedder: Embedder, by_document: bool) -> str:
    """The nearest passage vectors of the project, ranked: ordered by the expression the model's
    partial HNSW index is built on (``embeddings.passage_vector_index_ensure``), so the index serves
    it; the passage row is read only to keep one document's."""
    dim = int(embedder.dimension)
    distance = f"e.embedding::vector({dim}) <=> %(vec)s::vector({dim})"
    join = "JOIN kb.document_passages p ON p.id = e.passage_id" if by_document else ""
    document = " AND p.document_id = %(document)s" if by_document else ""
    return f"""
        SELECT id, row_number() OVER (ORDER BY distance, id) FROM (
            SELECT e.passage_id AS id, {distance} AS distance
            FROM kb.document_passage_embeddings e {join}
            WHERE e.project_id = %(project)s AND e.model = %(model)s{document}
            ORDER BY {distance} LIMIT %(candidates)s
        ) nearest"""


def passages_pending_count(*, project_id: uuid.UUID) -> int:
    """How many of the project's passages wait for the background worker's vector."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM kb.document_passages WHERE project_id = %s AND embedding_pending",
            [project_id],
        )
        return int(cursor.fetchone()[0])


def passages_get(*, project_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> list[dict[str, Any]]:
    """The project's passages among ``ids`` (others are left out), in no particular order."""
    if not ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT {PASSAGE_COLUMNS} FROM kb.document_passages p
                JOIN kb.documents d ON d.id = p.document_id
                WHERE p.project_id = %s AND p.id = ANY(%s)""",
            [project_id, list(ids)],
        )
        return [passage_row(row) for row in cursor.fetchall()]

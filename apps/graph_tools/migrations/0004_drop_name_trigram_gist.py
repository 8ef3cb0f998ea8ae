"""Drop the GiST trigram index of 0003: hybrid_search filters names with ``%`` through GIN.

The GiST KNN scan (nearest names first) walked much of the index at 100k names, 40-85 ms for
a query with no similar name; the GIN trigram index of 0001 finds the names sharing enough of
the query's trigrams directly (see ``search.TRIGRAM_MIN_SIMILARITY``).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("graph_tools", "0003_name_trigram_gist"),
    ]

    operations = [
        migrations.RunSQL(
            sql="DROP INDEX IF EXISTS kb.graph_obj_name_trgm_gist",
            reverse_sql=(
                "CREATE INDEX IF NOT EXISTS graph_obj_name_trgm_gist ON kb.graph_objects "
                "USING gist (name gist_trgm_ops)"
            ),
        ),
    ]

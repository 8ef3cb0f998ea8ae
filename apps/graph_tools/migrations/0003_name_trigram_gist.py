"""A GiST trigram index on names: hybrid_search takes the nearest names in index order (KNN)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("graph_tools", "0002_search_indexes"),
    ]

    operations = [
        migrations.RunSQL(
            sql=(
                "CREATE INDEX IF NOT EXISTS graph_obj_name_trgm_gist ON kb.graph_objects "
                "USING gist (name gist_trgm_ops)"
            ),
            reverse_sql="DROP INDEX IF EXISTS kb.graph_obj_name_trgm_gist",
        ),
    ]

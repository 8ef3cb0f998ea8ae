"""Entities by name, case aside: ``(project_id, lower(name))``, for the starts of ``query_paths``.

A name ("Benin", "the godfather") or the names a question mentions (every word sequence of it,
one ``lower(name) = ANY(…)``) are looked up through this index at any graph size; the trigram
index serves similarity, not equality. The SQL names the index with its schema: Django's index
operations drop by bare name, which misses the kb schema (as migration 0010 notes).
"""

import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("graph_tools", "0013_hnsw_ef_construction"),
        ("projects", "0002_invitations"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "CREATE INDEX graph_obj_project_lname ON kb.graph_objects (project_id, lower(name))",
                    "DROP INDEX kb.graph_obj_project_lname",
                )
            ],
            state_operations=[
                migrations.AddIndex(
                    model_name="graphobject",
                    index=models.Index(
                        models.F("project"),
                        django.db.models.functions.text.Lower("name"),
                        name="graph_obj_project_lname",
                    ),
                )
            ],
        )
    ]

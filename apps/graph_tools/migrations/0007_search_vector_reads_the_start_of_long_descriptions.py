"""Full-text search reads the first 100,000 characters of a description (models.SEARCH_DESCRIPTION_CHARS).

A description long enough to give more than 1 MB of lexemes made PostgreSQL refuse the row
("string is too long for tsvector"), so importing it failed with a 500. A generated column's
expression cannot be altered on PostgreSQL before 17, so the column and its GIN index are dropped
and added again (the table is rewritten once), and the index gets back the bounded pending list
of migration 0006.
"""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("graph_tools", "0006_gin_pending_list_limit"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="graphobject", name="graph_obj_search_vector"),
        migrations.RemoveField(model_name="graphobject", name="search_vector"),
        migrations.AddField(
            model_name="graphobject",
            name="search_vector",
            field=models.GeneratedField(
                db_persist=True,
                expression=django.contrib.postgres.search.CombinedSearchVector(
                    django.contrib.postgres.search.SearchVector("name", config="english", weight="A"),
                    "||",
                    django.contrib.postgres.search.SearchVector(
                        django.db.models.functions.text.Left("description", 100000),
                        config="english",
                        weight="B",
                    ),
                    django.contrib.postgres.search.SearchConfig("english"),
                ),
                output_field=django.contrib.postgres.search.SearchVectorField(),
            ),
        ),
        migrations.AddIndex(
            model_name="graphobject",
            index=django.contrib.postgres.indexes.GinIndex(fields=["search_vector"], name="graph_obj_search_vector"),
        ),
        migrations.RunSQL(
            sql="ALTER INDEX kb.graph_obj_search_vector SET (gin_pending_list_limit = 256)",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]

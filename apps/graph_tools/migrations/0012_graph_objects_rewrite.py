"""Rewrite ``kb.graph_objects`` without the vectors migration 0010 moved out.

``DROP COLUMN`` only hides a column: every existing row keeps its 1.5 kB vector on disk (and 0010's
``UPDATE`` of the pending flag wrote a second copy of each row), so without a rewrite the entity
heap of an existing installation stays as large as before, or twice as large, until it is next
rewritten. ``VACUUM FULL`` rewrites it in its physical order (a project's rows stay together) and
its indexes; it holds an exclusive lock meanwhile (about a minute at 1M entities) and cannot run
inside a transaction, hence a migration of its own.
"""

from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("graph_tools", "0011_embedding_foreign_keys_cascade"),
    ]

    operations = [
        migrations.RunSQL("VACUUM (FULL, ANALYZE) kb.graph_objects", reverse_sql=migrations.RunSQL.noop),
    ]

"""Make the foreign keys of ``kb.graph_object_embeddings`` cascade in the database.

Django 5.2 creates foreign keys without ``ON DELETE`` (the ORM cascades itself), so a raw
``DELETE`` of entities (the importer's and the benchmarks' SQL, a deferred-FK order in one
transaction) would leave their vectors behind and fail at commit. A migration of its own because
Django adds a new table's foreign keys at the end of the migration that creates it.
"""

from django.db import migrations

_CASCADE_SQL = """
DO $$
DECLARE c record;
BEGIN
  FOR c IN SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
           WHERE conrelid = 'kb.graph_object_embeddings'::regclass AND contype = 'f' LOOP
    EXECUTE format('ALTER TABLE kb.graph_object_embeddings DROP CONSTRAINT %I', c.conname);
    EXECUTE format('ALTER TABLE kb.graph_object_embeddings ADD CONSTRAINT %I %s ON DELETE CASCADE',
                   c.conname, replace(c.def, ' DEFERRABLE INITIALLY DEFERRED', '')) || ' DEFERRABLE INITIALLY DEFERRED';
  END LOOP;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("graph_tools", "0010_embeddings_own_table"),
    ]

    operations = [
        migrations.RunSQL(_CASCADE_SQL, reverse_sql=migrations.RunSQL.noop),
    ]

"""The two indexes the graph pages read through (#51), so they stay bounded on a large project.

- ``graph_obj_project_type_lname``: a type's entities by name, case aside, a page at a time from a
  name on (the graph page's list filtered by type; ``graph_obj_project_lname`` serves it unfiltered).
- ``chat_msg_citations``: the answers that cited an entity (``citations @> '[{"id": …}]'``), for
  the entity page, without reading every answer of the project.

Raw SQL with the schema named (Django's index operations drop by bare name, which misses the kb
schema; see graph_tools 0014); the models do not declare them, as graph_tools 0019's alias index.
"""

from django.db import migrations

SQL = [
    "CREATE INDEX IF NOT EXISTS graph_obj_project_type_lname ON kb.graph_objects (project_id, type, lower(name))",
    "CREATE INDEX IF NOT EXISTS chat_msg_citations ON kb.chat_messages USING gin (citations jsonb_path_ops) "
    "WHERE role = 'assistant'",
]
REVERSE = [
    "DROP INDEX IF EXISTS kb.graph_obj_project_type_lname",
    "DROP INDEX IF EXISTS kb.chat_msg_citations",
]


class Migration(migrations.Migration):
    dependencies = [
        ("graph_tools", "0023_documents_move_to_their_app"),
        ("chat", "0013_client_threads"),
        ("curation", "0001_curation_settings"),
    ]

    operations = [migrations.RunSQL(sql=SQL, reverse_sql=REVERSE)]

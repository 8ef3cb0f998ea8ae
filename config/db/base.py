"""PostgreSQL backend that also sees the tables of schema ``kb``.

kgchat's own tables live in the schema ``kb`` (``db_table = 'kb"."name'``). Django's introspection
only lists tables on the search path, so ``flush`` (used between transactional tests) would skip
them and then fail to truncate ``auth_user``, which they reference. Listing them here under the
same quoted name the models use keeps every Django tool working unchanged.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base, introspection
from django.db.backends.postgresql.introspection import TableInfo

SCHEMA = "kb"


class DatabaseIntrospection(introspection.DatabaseIntrospection):
    def get_table_list(self, cursor: Any) -> list[TableInfo]:
        tables = super().get_table_list(cursor)
        cursor.execute(
            """
            SELECT c.relname,
                   CASE WHEN c.relispartition THEN 'p' WHEN c.relkind IN ('m', 'v') THEN 'v' ELSE 't' END,
                   obj_description(c.oid, 'pg_class')
            FROM pg_catalog.pg_class c
            JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relkind IN ('f', 'm', 'p', 'r', 'v') AND n.nspname = %s
            """,
            [SCHEMA],
        )
        return tables + [
            TableInfo(f'{SCHEMA}"."{name}', kind, comment) for name, kind, comment in cursor.fetchall()
        ]


class DatabaseWrapper(base.DatabaseWrapper):
    introspection_class = DatabaseIntrospection

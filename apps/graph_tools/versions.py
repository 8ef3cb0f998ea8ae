"""A project's graph version (``kb.graph_versions``): bumped once by every import and every write."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connection
from django.db.models.expressions import RawSQL

from apps.core.prepared import QueryTemplate
from apps.graph_tools.models import GraphVersion


def graph_version_bump(*, project_id: uuid.UUID) -> int:
    """Add one to the project's graph version and return it; the row stays locked until the
    transaction ends, so call it only inside the transaction that writes."""
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO kb.graph_versions (project_id, version) VALUES (%s, 1)
               ON CONFLICT (project_id) DO UPDATE SET version = kb.graph_versions.version + 1
               RETURNING version""",
            [project_id],
        )
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def graph_version_current(*, project_id: uuid.UUID) -> int:
    """The project's graph version now (0: nothing was ever imported or written)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT version FROM kb.graph_versions WHERE project_id = %s", [project_id])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


_GRAPH_VERSION = QueryTemplate(
    lambda *, project_id: GraphVersion.objects.filter(project_id=project_id).values("version")
)


def graph_version_query(project_id: uuid.UUID) -> tuple[str, list[Any]]:
    """The project's graph version as a one-value read for ``rows_write`` (no row: version 0)."""
    return _GRAPH_VERSION.sql_with_params(project_id=project_id)


def graph_version_value(project_id: uuid.UUID) -> RawSQL:
    """The project's graph version as a value an inserted row takes in the same statement."""
    table = connection.ops.quote_name(GraphVersion._meta.db_table)
    return RawSQL(f"COALESCE((SELECT version FROM {table} WHERE project_id = %s), 0)", [project_id])

"""A project's graph version (``kb.graph_versions``): bumped once by every import and every write."""

from __future__ import annotations

import uuid

from django.db import connection


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

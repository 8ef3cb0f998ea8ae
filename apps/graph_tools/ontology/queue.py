"""The ontology-violations queue (#51): the relationships whose type, or whose ends' types, break the
project's ontology, a bounded page at a time.

Which (relationship type, source type, target type) triples break it is read from the per-project
type counts (no scan), and so is the queue's ``count``; a page then walks at most ``SCAN_MAX`` of those
relationship types' rows in (type, id) order from the cursor through the (project, type, id)
index, keeping the rows whose ends have a breaking pair of types, under a statement timeout. The
cursor is the last row's (type, id) (the last returned, or the last looked at), opaque to clients.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from apps.core.errors import ServiceError
from apps.graph_tools.ontology.checks import end_violations
from apps.graph_tools.ontology.selectors import ontology_active
from apps.projects.selectors import Principal, project_get

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
STATEMENT_TIMEOUT_MS = 5_000
# Relationships of the breaking types one page looks at, at most.
SCAN_MAX = 10_000
KIND = "ontology-violations"


class InvalidCursor(ServiceError):
    """The cursor is not one this queue gave."""

    code = "invalid_cursor"


@dataclass(frozen=True)
class QueuePage:
    """A page of a queue: its items, the cursor of the next page (None: the last), and how many
    items the whole queue holds."""

    items: list[dict[str, Any]]
    next_cursor: str | None
    count: int

    def as_json(self) -> dict[str, Any]:
        """The page as the curation queues give theirs (``kind``, ``items``, ``nextCursor``,
        ``bounds``), with ``count``: how many relationships the whole queue holds."""
        return {
            "kind": KIND,
            "items": self.items,
            "nextCursor": self.next_cursor,
            "bounds": {
                "limitMax": MAX_LIMIT,
                "scanMax": SCAN_MAX,
                "statementTimeoutMs": STATEMENT_TIMEOUT_MS,
            },
            "count": self.count,
        }


def cursor_encode(rel_type: str, rel_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([rel_type, rel_id]).encode()).decode().rstrip("=")


def cursor_decode(cursor: str) -> tuple[str, uuid.UUID]:
    try:
        rel_type, rel_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(rel_type, str) or "\x00" in rel_type:
            raise ValueError(rel_type)
        return rel_type, uuid.UUID(str(rel_id))
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise InvalidCursor("cursor is not one this queue gave: start again without one") from None


def _breaking_triples(project_id: uuid.UUID, ontology: Any) -> tuple[dict[tuple[str, str, str], Any], int]:
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT type, src_type, dst_type, count FROM kb.graph_relationship_type_counts
                WHERE project_id = %s ORDER BY type, src_type, dst_type""",
            [project_id],
        )
        rows = cursor.fetchall()
    breaking, count = {}, 0
    for rel_type, src_type, dst_type, n in rows:
        found = end_violations(ontology, rel_type, src_type, dst_type)
        if found:
            breaking[(rel_type, src_type, dst_type)] = found
            count += int(n)
    return breaking, count


def _entity(row: tuple[Any, ...]) -> dict[str, Any]:
    return {"id": str(row[0]), "key": row[1], "name": row[2], "type": row[3]}


_SCANNED = """SELECT r.id, r.type, r.src_id, r.dst_id, r.properties FROM kb.graph_relationships r
               WHERE r.project_id = %(p)s AND r.type = ANY(%(types)s)
                 AND (%(after_type)s::text IS NULL OR (r.type, r.id) > (%(after_type)s::text, %(after_id)s::uuid))
               ORDER BY r.type, r.id LIMIT %(scan)s"""


def _page_rows(
    project_id: uuid.UUID,
    triples: list[tuple[str, str, str]],
    after: tuple[str, uuid.UUID] | None,
    limit: int,
) -> tuple[list[tuple[Any, ...]], tuple[str, str] | None]:
    """The breaking relationships among the next ``SCAN_MAX`` of the breaking types' rows after the
    cursor (at most ``limit + 1``), and the last row that stretch scanned when it was full."""
    params: dict[str, Any] = {
        "p": project_id,
        "types": sorted({t[0] for t in triples}),
        "t": [t[0] for t in triples],
        "s": [t[1] for t in triples],
        "d": [t[2] for t in triples],
        "after_type": after[0] if after else None,
        "after_id": after[1] if after else None,
        "scan": SCAN_MAX,
        "limit": limit + 1,
    }
    with transaction.atomic(), connection.cursor() as db:
        db.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
        db.execute(
            f"""SELECT r.id, r.type, r.properties, s.id, s.key, s.name, s.type, d.id, d.key, d.name, d.type
                  FROM ({_SCANNED}) r
                  JOIN kb.graph_objects s ON s.id = r.src_id
                  JOIN kb.graph_objects d ON d.id = r.dst_id
                 WHERE (r.type, s.type, d.type) IN
                       (SELECT * FROM unnest(%(t)s::text[], %(s)s::text[], %(d)s::text[]))
                 ORDER BY r.type, r.id LIMIT %(limit)s""",
            params,
        )
        rows = db.fetchall()
        if len(rows) > limit:
            return rows, None
        db.execute(
            f"SELECT type, id, count(*) OVER () FROM ({_SCANNED}) w ORDER BY type DESC, id DESC LIMIT 1",
            params,
        )
        last = db.fetchone()
    return rows, (last[0], str(last[1])) if last is not None and last[2] >= SCAN_MAX else None


def violations_page(
    *, project_id: uuid.UUID, cursor: str | None = None, limit: int = DEFAULT_LIMIT
) -> QueuePage:
    """A page of the project's relationships that break its ontology, each with its ends and the
    rules it breaks; an empty queue when the project has no ontology. A page looks at no more than
    ``SCAN_MAX`` relationships of the breaking types: it may hold fewer than ``limit`` items while
    ``next_cursor`` is set (None: the queue's end)."""
    limit = max(1, min(int(limit), MAX_LIMIT))
    after = cursor_decode(cursor) if cursor else None
    ontology = ontology_active(project_id=project_id)
    if ontology is None:
        return QueuePage(items=[], next_cursor=None, count=0)
    breaking, count = _breaking_triples(project_id, ontology)
    if not breaking:
        return QueuePage(items=[], next_cursor=None, count=0)
    rows, scanned_to = _page_rows(project_id, list(breaking), after, limit)
    items = [
        {
            "relationship": {"id": str(r[0]), "type": r[1], "properties": _json(r[2])},
            "source": _entity(r[3:7]),
            "target": _entity(r[7:11]),
            "violations": breaking[(r[1], r[6], r[10])],
        }
        for r in rows[:limit]
    ]
    if len(rows) > limit:
        next_cursor: str | None = cursor_encode(
            items[-1]["relationship"]["type"], items[-1]["relationship"]["id"]
        )
    else:
        next_cursor = cursor_encode(*scanned_to) if scanned_to is not None else None
    return QueuePage(items=items, next_cursor=next_cursor, count=count)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def violations_page_for(
    *, principal: Principal, project_ref: object, cursor: str | None = None, limit: int = DEFAULT_LIMIT
) -> QueuePage:
    """``violations_page`` of a project the principal is a member of."""
    project = project_get(principal=principal, project_ref=project_ref)
    return violations_page(project_id=project.id, cursor=cursor, limit=limit)

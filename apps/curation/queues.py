"""The queues of what needs care in a project's graph (#51): bounded pages behind a cursor.

Every queue walks the project's entities in the order of their import key (the unique index
``(project_id, key)``) from the cursor on and looks at no more than ``SCAN_MAX`` of them a page
(``duplicates``: ``duplicates.SEEDS_MAX``), so a page costs the same on a graph of a hundred
entities and of a million. A page holds at most ``limit`` items; it may hold fewer, even none,
while ``next_cursor`` is not ``None``: the walk stopped at its bound, and the next page goes on
from there. ``next_cursor`` is ``None`` only once the walk has reached the last entity.

- ``orphans``: entities with no relationship, in either direction.
- ``unsupported``: entities nothing backs any more. An entity is *supported* when (1) a passage
  mentions it now (a row of ``kb.passage_mentions`` of a ``kb.mention_names`` row linked to it),
  or (2) it was imported (a ``kb.graph_changes`` row ``import_entity`` of it: an import is never
  withdrawn), or (3) a change of it, or of a relationship at one of its ends, was extracted from
  a passage that still exists (``graph_changes.passage_id`` names a row of
  ``kb.document_passages``). Everything else is listed: entities extracted from documents since
  deleted or re-uploaded without those passages, and entities written only by hand or by an
  agent that no passage mentions. Each item says what made it last (``lastChange``).
- ``duplicates``: pairs of entities that may be one (``duplicates.py``).
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection

from apps.core.errors import NotFound, ServiceError
from apps.core.times import json_time
from apps.graph_tools.search import ENTITY_COLUMNS, entity_row
from apps.projects.selectors import Principal, project_get

# At most this many entities are looked at for one page of ``orphans`` or ``unsupported``.
SCAN_MAX = 2000
LIMIT_MAX = 100
LIMIT_DEFAULT = 25
KEY_MAX = 512  # ``GraphObject.key``'s length
DESCRIPTION_CHARS = 200


class InvalidCursor(ServiceError):
    """The cursor is not one a page of this queue gave."""

    code = "invalid_cursor"


class UnknownQueue(NotFound):
    """No such queue."""

    code = "unknown_queue"


@dataclass(frozen=True)
class Cursor:
    """Where a walk goes on: after the entity whose key is ``key`` (``""``: from the start), or at
    it, past its first ``skip`` items (a seed of ``duplicates`` whose pairs a page cut)."""

    key: str = ""
    skip: int = 0

    def encode(self, kind: str) -> str:
        """The text of this cursor for a page of queue ``kind``: bound to it, so another queue's
        walk refuses it (the same key means another place there: a duplicates seed's ``skip``)."""
        raw = json.dumps({"q": kind, "k": self.key, "n": self.skip}, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def cursor_decode(text: str | None, *, kind: str) -> Cursor:
    """A cursor of queue ``kind`` from its text (``None`` or ``""``: the start); ``InvalidCursor``
    for anything else, another queue's cursor included."""
    if not text:
        return Cursor()
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidCursor("cursor: not a cursor this queue gave (pass nextCursor as it was)") from None
    if not isinstance(data, dict) or set(data) != {"q", "k", "n"}:
        raise InvalidCursor("cursor: not a cursor this queue gave (pass nextCursor as it was)")
    if data["q"] != kind:
        raise InvalidCursor(
            f"cursor: not a cursor of the {kind} queue (each queue's nextCursor goes on that queue only)"
        )
    key, skip = data["k"], data["n"]
    if not isinstance(key, str) or len(key) > KEY_MAX or "\x00" in key:
        raise InvalidCursor("cursor: not a cursor this queue gave (pass nextCursor as it was)")
    if not isinstance(skip, int) or isinstance(skip, bool) or not 0 <= skip <= LIMIT_MAX * 10:
        raise InvalidCursor("cursor: not a cursor this queue gave (pass nextCursor as it was)")
    return Cursor(key=key, skip=skip)


@dataclass(frozen=True)
class QueuePage:
    """A page of a queue: its items (JSON-ready dicts), the cursor of the next page (``None``: the
    walk is done) and the bounds the walk keeps."""

    kind: str
    items: list[dict[str, Any]]
    next_cursor: str | None
    bounds: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "items": self.items,
            "nextCursor": self.next_cursor,
            "bounds": self.bounds,
        }


QueueReader = Callable[..., QueuePage]
_QUEUES: dict[str, QueueReader] = {}


def queue_register(kind: str, reader: QueueReader) -> None:
    """Add a queue: ``reader(project_id=, cursor=, limit=) -> QueuePage``."""
    if kind in _QUEUES:
        raise ValueError(f"queue {kind!r} registered twice")
    _QUEUES[kind] = reader


def queue_kinds() -> list[str]:
    return list(_QUEUES)


def queue_read(*, project_id: uuid.UUID, kind: str, cursor: str | None, limit: int) -> QueuePage:
    """A page of queue ``kind`` of a project (no access check: the tool's and the transports'
    callers have made it)."""
    reader = _QUEUES.get(kind)
    if reader is None:
        raise UnknownQueue(
            f"no queue {kind!r}; the queues are: {', '.join(_QUEUES)}, and ontology-violations (its own route)"
        )
    if not 1 <= limit <= LIMIT_MAX:
        raise ServiceError(f"limit: from 1 to {LIMIT_MAX}", code="invalid_request")
    return reader(project_id=project_id, cursor=cursor_decode(cursor, kind=kind), limit=limit)


def queue_page(
    *,
    principal: Principal,
    project_ref: object,
    kind: str,
    cursor: str | None = None,
    limit: int = LIMIT_DEFAULT,
) -> QueuePage:
    """A page of queue ``kind`` of a project the principal is a member of (any role)."""
    project = project_get(principal=principal, project_ref=project_ref)
    return queue_read(project_id=project.id, kind=kind, cursor=cursor, limit=limit)


def _walk_end(project_id: uuid.UUID, after: str, scan: int) -> str | None:
    """The key of the ``scan``-th entity after ``after`` in key order when more follow it (None:
    the walk has reached the last entity)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT o.key FROM kb.graph_objects o WHERE o.project_id = %s AND o.key > %s
               ORDER BY o.key OFFSET %s LIMIT 2""",
            [project_id, after, scan - 1],
        )
        rows = cursor.fetchall()
    return rows[0][0] if len(rows) == 2 else None


def _filtered_walk(
    *, kind: str, project_id: uuid.UUID, cursor: Cursor, limit: int, where: str, extra: str = ""
) -> tuple[list[tuple[Any, ...]], str | None]:
    """The first ``limit`` of the next ``SCAN_MAX`` entities after the cursor that ``where``
    (over ``s``, the entity) keeps, with ``extra`` columns; and the next page's cursor."""
    with connection.cursor() as db:
        db.execute(
            f"""SELECT {ENTITY_COLUMNS.replace("o.", "s.")}, s.created_at{extra}
                FROM (SELECT o.id, o.key, o.type, o.name, o.description, o.created_at FROM kb.graph_objects o WHERE o.project_id = %(p)s AND o.key > %(after)s
                      ORDER BY o.key LIMIT %(scan)s) s
                WHERE {where}
                ORDER BY s.key LIMIT %(limit)s""",
            {"p": project_id, "after": cursor.key, "scan": SCAN_MAX, "limit": limit},
        )
        rows = db.fetchall()
    if len(rows) == limit:
        return rows, Cursor(key=rows[-1][1]).encode(kind)
    end = _walk_end(project_id, cursor.key, SCAN_MAX)
    return rows, (Cursor(key=end).encode(kind) if end is not None else None)


def _entity_item(row: tuple[Any, ...]) -> dict[str, Any]:
    item = entity_row(row)
    if len(item["description"]) > DESCRIPTION_CHARS:
        item["description"] = item["description"][: DESCRIPTION_CHARS - 1] + "…"
    item["createdAt"] = json_time(row[5])
    return item


def orphans_read(*, project_id: uuid.UUID, cursor: Cursor, limit: int) -> QueuePage:
    """Entities with no relationship in either direction, in key order."""
    rows, next_cursor = _filtered_walk(
        kind="orphans",
        project_id=project_id,
        cursor=cursor,
        limit=limit,
        where="""NOT EXISTS (SELECT 1 FROM kb.graph_relationships r WHERE r.src_id = s.id)
                 AND NOT EXISTS (SELECT 1 FROM kb.graph_relationships r WHERE r.dst_id = s.id)""",
    )
    return QueuePage(
        kind="orphans",
        items=[_entity_item(r) for r in rows],
        next_cursor=next_cursor,
        bounds={"scanMax": SCAN_MAX, "limitMax": LIMIT_MAX},
    )


# Support as the module's docstring defines it, over ``s`` (the entity).
SUPPORTED = """(
    EXISTS (SELECT 1 FROM kb.mention_names n JOIN kb.passage_mentions m ON m.mention_name_id = n.id
            WHERE n.entity_id = s.id)
    OR EXISTS (SELECT 1 FROM kb.graph_changes c WHERE c.entity_id = s.id AND c.action = 'import_entity')
    OR EXISTS (SELECT 1 FROM kb.graph_changes c JOIN kb.document_passages p ON p.id = c.passage_id
               WHERE c.entity_id = s.id)
    OR EXISTS (SELECT 1 FROM kb.graph_changes c JOIN kb.document_passages p ON p.id = c.passage_id
               WHERE c.src_id = s.id)
    OR EXISTS (SELECT 1 FROM kb.graph_changes c JOIN kb.document_passages p ON p.id = c.passage_id
               WHERE c.dst_id = s.id))"""

# The entity's latest own change: what made it as it is (for an unsupported item's evidence).
LAST_CHANGE = """, (SELECT json_build_object(
        'version', c.version, 'action', c.action, 'authority', c.authority, 'user', u.username,
        'documentId', c.document_id, 'passageId', c.passage_id, 'createdAt', c.created_at,
        'documentName', d.name)
      FROM kb.graph_changes c LEFT JOIN auth_user u ON u.id = c.user_id
      LEFT JOIN kb.documents d ON d.id = c.document_id
      WHERE c.entity_id = s.id ORDER BY c.version DESC, c.id DESC LIMIT 1)"""


def unsupported_read(*, project_id: uuid.UUID, cursor: Cursor, limit: int) -> QueuePage:
    """Entities nothing backs any more (the module's docstring), in key order, each with its
    latest change (``None`` for an entity written outside the audit)."""
    rows, next_cursor = _filtered_walk(
        kind="unsupported",
        project_id=project_id,
        cursor=cursor,
        limit=limit,
        where=f"NOT {SUPPORTED}",
        extra=LAST_CHANGE,
    )
    items = []
    for row in rows:
        last = row[6]
        if isinstance(last, str):
            last = json.loads(last)
        if last is not None:  # json_build_object wrote PostgreSQL's text of the time, not the schemas'
            last["createdAt"] = json_time(datetime.fromisoformat(last["createdAt"]))
        items.append({**_entity_item(row), "lastChange": last})
    return QueuePage(
        kind="unsupported",
        items=items,
        next_cursor=next_cursor,
        bounds={"scanMax": SCAN_MAX, "limitMax": LIMIT_MAX},
    )

"""Entity resolution for extraction (issue 26 item 3): whether a mention is an entity the graph has
(link), one it nearly has (merge, with the evidence: trigram or embedding similarity), or a new one."""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.db import connection

from apps.graph_tools.models import GraphObject
from apps.graph_tools.names import ALIAS_MATCH, normalised_name
from apps.graph_tools.search import vector_literal

# Entity resolution: names at least this similar (pg_trgm) to an existing entity's of the same type
# are proposed as that entity ("merge"); vectors at least this close (cosine) too.
TRIGRAM_MERGE = 0.6
EMBEDDING_MERGE = 0.93


def _entity_brief(row: Any) -> dict[str, Any]:
    return {"id": str(row[0]), "name": row[1], "type": row[2], "key": row[3]}


def entity_match(
    *, project_id: uuid.UUID, name: str, type_: str, embedder: Any = None
) -> tuple[str, dict[str, Any]]:
    """How a mention relates to the project's entities: ("link", evidence) for the same name or one
    of an entity's aliases, ("merge", evidence) for a similar name or a close vector of the same type, ("create", {})."""
    wanted = normalised_name(name)
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT id, name, type, key FROM kb.graph_objects
               WHERE project_id = %s AND lower(name) = lower(%s) ORDER BY (type = %s) DESC LIMIT 5""",
            [project_id, name, type_],
        )
        rows = cursor.fetchall()
        cursor.execute(
            """SELECT id, name, type, key FROM kb.graph_objects
               WHERE project_id = %s AND type = %s AND lower(name) LIKE %s LIMIT 20""",
            [project_id, type_, "%" + wanted.replace("%", "").replace("_", "")[:100] + "%"],
        )
        rows += cursor.fetchall()
    for row in rows:
        if normalised_name(row[1]) == wanted:
            return "link", {"method": "name", "entity": _entity_brief(row)}
    with connection.cursor() as cursor:
        # An entity known by this name: a mention an earlier change set linked or merged into it.
        cursor.execute(
            f"""SELECT id, name, type, key FROM kb.graph_objects o
                WHERE project_id = %(p)s AND {ALIAS_MATCH.format(names="ARRAY[lower(%(n)s), %(w)s]")}
                ORDER BY (type = %(t)s) DESC, name, key LIMIT 1""",
            {"p": project_id, "n": name, "w": wanted, "t": type_},
        )
        row = cursor.fetchone()
    if row is not None:
        return "link", {"method": "alias", "alias": name, "entity": _entity_brief(row)}
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT id, name, type, key, similarity(name, %(n)s) AS s FROM kb.graph_objects
               WHERE project_id = %(p)s AND type = %(t)s AND similarity(name, %(n)s) >= %(min)s
               ORDER BY s DESC LIMIT 1""",
            {"p": project_id, "t": type_, "n": name, "min": TRIGRAM_MERGE},
        )
        row = cursor.fetchone()
    if row is not None:
        return "merge", {"method": "trigram", "score": round(float(row[4]), 3), "entity": _entity_brief(row)}
    if embedder is not None:
        vector = embedder.embed_query(f"{name} ({type_})")
        with connection.cursor() as cursor:
            cursor.execute(
                """SELECT o.id, o.name, o.type, o.key, 1 - (e.embedding <=> %(v)s::vector) AS s
                   FROM kb.graph_object_embeddings e JOIN kb.graph_objects o ON o.id = e.object_id
                   WHERE e.project_id = %(p)s AND e.model = %(m)s AND o.type = %(t)s
                   ORDER BY e.embedding <=> %(v)s::vector LIMIT 1""",
                {"p": project_id, "m": embedder.name, "t": type_, "v": vector_literal(vector)},
            )
            row = cursor.fetchone()
        if row is not None and float(row[4]) >= EMBEDDING_MERGE:
            return "merge", {
                "method": "embedding",
                "score": round(float(row[4]), 3),
                "entity": _entity_brief(row),
            }
    return "create", {}


def key_for(project_id: uuid.UUID, type_: str, name: str, taken: set[str]) -> str:
    base = f"{type_.lower()}:{re.sub(r'[^a-z0-9]+', '-', name.casefold()).strip('-') or 'entity'}"[:480]
    key, n = base, 1
    while key in taken or GraphObject.objects.filter(project_id=project_id, key=key).exists():
        n += 1
        key = f"{base}-{n}"
    taken.add(key)
    return key

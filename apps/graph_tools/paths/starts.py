"""Resolving a path query's start entities: by name, key or id, a search, or the names a text mentions."""

from __future__ import annotations

import re
import string
import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection

from apps.graph_tools.paths.args import MAX_START_ENTITIES, MENTION_MAX_WORDS, MENTION_TEXT_CHARS, StartRef
from apps.graph_tools.search import json_value, text_search
from apps.graph_tools.selectors import entity_resolve
from apps.projects.selectors import parse_uuid

# --- resolving the starts --------------------------------------------------------------------

ENTITY_COLUMNS = "o.id, o.key, o.type, o.name, o.properties"
_EDGE_PUNCTUATION = string.punctuation + "¿¡“”‘’«»…"
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)


def entity_row(row: Sequence[Any]) -> dict[str, Any]:
    return {
        "id": str(row[0]),
        "key": row[1],
        "type": row[2],
        "name": row[3],
        "properties": json_value(row[4]) or {},
    }


def compact(entity: dict[str, Any]) -> dict[str, Any]:
    return {k: entity[k] for k in ("id", "key", "type", "name")}


def fetch(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _mention_candidates(text: str) -> dict[str, tuple[int, int]]:
    """Every word sequence of ``text`` (up to ``MENTION_MAX_WORDS``), lower case, with its span.

    Each also without the punctuation at its ends and without a possessive "'s" ("Ghana's"), so a
    name at the end of a question ("… of Ghana?") or in casual phrasing is found; the widest span
    of a candidate is kept.
    """
    words = text[:MENTION_TEXT_CHARS].split()
    found: dict[str, tuple[int, int]] = {}
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + MENTION_MAX_WORDS) + 1):
            raw = " ".join(words[i:j])
            stripped = raw.strip(_EDGE_PUNCTUATION)
            for variant in {raw, stripped, _POSSESSIVE.sub("", stripped)}:
                variant = variant.casefold()
                if variant and variant.strip(_EDGE_PUNCTUATION):
                    found.setdefault(variant, (i, j))
    return found


def _mentioned(project_id: uuid.UUID, text: str, type_: str | None) -> list[dict[str, Any]]:
    """The entities whose whole names ``text`` contains: the longest names first, overlaps left out."""
    candidates = _mention_candidates(text)
    if not candidates:
        return []
    params: dict[str, Any] = {"project": project_id, "names": list(candidates), "type": type_}
    type_filter = " AND o.type = %(type)s" if type_ else ""
    rows = fetch(
        f"""SELECT {ENTITY_COLUMNS} FROM kb.graph_objects o
            WHERE o.project_id = %(project)s AND lower(o.name) = ANY(%(names)s){type_filter}
            ORDER BY o.name, o.key LIMIT {MAX_START_ENTITIES * 5}""",
        params,
    )
    by_name: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        entity = entity_row(row)
        by_name.setdefault(entity["name"].casefold(), []).append(entity)
    spans = sorted(
        ((name, candidates[name]) for name in by_name if name in candidates),
        key=lambda item: (-(item[1][1] - item[1][0]), -len(item[0]), item[1][0]),
    )
    taken: list[tuple[int, int]] = []
    chosen: list[dict[str, Any]] = []
    for name, (start, end) in spans:
        if any(start < t_end and t_start < end for t_start, t_end in taken):
            continue
        taken.append((start, end))
        chosen.extend(by_name[name])
    return chosen


def resolve_one(project_id: uuid.UUID, item: str | StartRef) -> list[dict[str, Any]]:
    if isinstance(item, str):
        by_ref = fetch(
            f"""SELECT {ENTITY_COLUMNS} FROM kb.graph_objects o
                WHERE o.project_id = %(project)s AND (o.key = %(ref)s OR o.id = %(id)s)
                ORDER BY (o.id = %(id)s) DESC NULLS LAST LIMIT 1""",
            {"project": project_id, "ref": item, "id": parse_uuid(item)},
        )
        if by_ref:
            return [entity_row(by_ref[0])]
        item = StartRef(name=item)
    type_filter = " AND o.type = %(type)s" if item.type else ""
    if item.key is not None:
        entity = entity_resolve(project_id=project_id, ref=item.key)
        if item.type and entity["type"] != item.type:
            return []
        return [{**compact(entity), "properties": entity.get("properties") or {}}]
    if item.name is not None:
        rows = fetch(
            f"""SELECT {ENTITY_COLUMNS} FROM kb.graph_objects o
                WHERE o.project_id = %(project)s AND lower(o.name) = lower(%(name)s){type_filter}
                ORDER BY o.name, o.key LIMIT {MAX_START_ENTITIES}""",
            {"project": project_id, "name": item.name, "type": item.type},
        )
        return [entity_row(r) for r in rows]
    if item.search is not None:
        hits = text_search(project_id=project_id, query=item.search, type=item.type, limit=10)
        if not hits:
            return []
        rows = fetch(
            f"SELECT {ENTITY_COLUMNS} FROM kb.graph_objects o WHERE o.id = ANY(%(ids)s)",
            {"ids": [uuid.UUID(h["id"]) for h in hits]},
        )
        order = {h["id"]: i for i, h in enumerate(hits)}
        return sorted((entity_row(r) for r in rows), key=lambda e: order[e["id"]])
    assert item.mentioned_in is not None
    return _mentioned(project_id, item.mentioned_in, item.type)


def start_label(item: str | StartRef) -> str:
    if isinstance(item, str):
        return item
    return next(str(v) for v in (item.name, item.key, item.search, item.mentioned_in) if v is not None)

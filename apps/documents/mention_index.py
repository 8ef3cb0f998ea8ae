"""The mention index (issue #48): each passage's mentions of named things, stored as rows at
upload, without a model.

A passage's mentions (``recognizer.mentions_find``) become ``kb.passage_mentions`` rows, each a
mention of one ``kb.mention_names`` row: the name's ``normalised`` key, one per project, linked to
the entity of the graph it names (its name or an alias, normalised the same way) or else a
candidate for a new entity. The reviewed graph is not touched: it still changes only through
change sets. A passage whose text a re-upload keeps keeps its mentions; a removed passage takes
its mentions with it, and a name no passage mentions any more is removed with them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection

from apps.documents.models import MentionName, Passage, PassageMention
from apps.graph_tools.merges import MergeFollower
from apps.graph_tools.names import ALIAS_MATCH
from apps.graph_tools.recognizer import Mention, mentions_find, normalise

# Names stored in one statement.
BATCH = 2000


def _entities_named(project_id: uuid.UUID, keys: set[str], surfaces: set[str]) -> dict[str, uuid.UUID]:
    """The project's entities whose name or an alias is one of ``keys`` once normalised, by key.

    Looked up by the lower-cased spellings and keys (the indexed ``lower(name)`` and aliases), then
    compared normalised, so "Arrête ton cinéma" links the entity "Arrete Ton Cinema". Of two
    entities with one key the first by id is taken."""
    if not keys:
        return {}
    lowered = sorted({s.casefold() for s in surfaces} | keys)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT o.id, o.name, COALESCE(kb.entity_aliases(o.properties), '{{}}'::text[])
                FROM kb.graph_objects o
                WHERE o.project_id = %(project)s
                  AND (lower(o.name) = ANY(%(names)s) OR {ALIAS_MATCH.format(names="%(names)s")})
                ORDER BY o.id""",
            {"project": project_id, "names": lowered},
        )
        rows = cursor.fetchall()
    found: dict[str, uuid.UUID] = {}
    for entity_id, name, aliases in rows:
        for spelling in [name, *aliases]:
            key = normalise(spelling)
            if key in keys:
                found.setdefault(key, entity_id)
    return found


def _names_upsert(
    project_id: uuid.UUID, first: dict[str, str], entities: dict[str, uuid.UUID]
) -> dict[str, uuid.UUID]:
    """The ``kb.mention_names`` ids of ``first``'s keys (key → first spelling), made where missing;
    a name that had no entity gets the one it names now."""
    ids: dict[str, uuid.UUID] = {}
    keys = sorted(first)
    with connection.cursor() as cursor:
        for at in range(0, len(keys), BATCH):
            chunk = keys[at : at + BATCH]
            cursor.execute(
                """INSERT INTO kb.mention_names (id, project_id, normalised, name, entity_id, created_at)
                   SELECT gen_random_uuid(), %(project)s, k, n, e, now()
                   FROM unnest(%(keys)s::text[], %(names)s::text[], %(entities)s::uuid[]) AS t(k, n, e)
                   ON CONFLICT (project_id, normalised) DO UPDATE
                   SET entity_id = COALESCE(kb.mention_names.entity_id, EXCLUDED.entity_id)
                   RETURNING normalised, id""",
                {
                    "project": project_id,
                    "keys": chunk,
                    "names": [first[k] for k in chunk],
                    "entities": [entities.get(k) for k in chunk],
                },
            )
            ids.update(dict(cursor.fetchall()))
    return ids


def passages_mentions_index(*, project_id: uuid.UUID, passages: Sequence[Passage]) -> int:
    """Store the mentions of ``passages`` (new ones: a passage is indexed once, as it is stored).

    The first passage of a document (ordinal 0) also mentions the document's title: a Markdown
    heading, or a short ``Title: `` start. Returns how many mentions were stored. Runs inside the
    caller's transaction."""
    found: list[tuple[Passage, list[Mention]]] = [
        (p, mentions_find(p.text, title=p.ordinal == 0)) for p in passages
    ]
    first: dict[str, str] = {}
    surfaces: set[str] = set()
    for _, mentions in found:
        for mention in mentions:
            first.setdefault(mention.normalised, mention.surface)
            surfaces.add(mention.surface)
    if not first:
        return 0
    entities = _entities_named(project_id, set(first), surfaces)
    names = _names_upsert(project_id, first, entities)
    rows = [
        PassageMention(
            project_id=project_id,
            passage_id=passage.id,
            mention_name_id=names[m.normalised],
            surface=m.surface,
            kind=m.kind,
            char_start=m.start,
            char_end=m.end,
        )
        for passage, mentions in found
        for m in mentions
    ]
    PassageMention.objects.bulk_create(rows, batch_size=BATCH)
    return len(rows)


def mention_names_prune(*, project_id: uuid.UUID, name_ids: Iterable[uuid.UUID]) -> int:
    """Remove those of ``name_ids`` that no passage mentions any more (after passages were removed).
    Returns how many were removed."""
    ids = list(set(name_ids))
    if not ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            """DELETE FROM kb.mention_names n
               WHERE n.project_id = %s AND n.id = ANY(%s)
                 AND NOT EXISTS (SELECT 1 FROM kb.passage_mentions m WHERE m.mention_name_id = n.id)""",
            [project_id, ids],
        )
        return cursor.rowcount


def mention_names_of_passages(*, passage_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """The names ``passage_ids`` mention (read before the passages are removed, to prune them)."""
    if not passage_ids:
        return set()
    return set(
        PassageMention.objects.filter(passage_id__in=list(passage_ids))
        .values_list("mention_name_id", flat=True)
        .distinct()
    )


def _names_merged(project_id: uuid.UUID, merged_id: str, keep_id: str) -> list[str]:
    """The names linked to an entity merged into another, linked to that other instead (before the
    merged entity goes, which would unlink them); their ids, for an undo."""
    names = MentionName.objects.filter(project_id=project_id, entity_id=uuid.UUID(merged_id))
    ids = [str(i) for i in names.values_list("id", flat=True)]
    names.update(entity_id=keep_id)
    return ids


def _names_unmerged(project_id: uuid.UUID, merged_id: str, keep_id: str, moved: Any) -> None:
    """Link the names a merge moved back to the restored entity (those still on the kept one)."""
    ids = [i for i in moved if isinstance(i, str)] if isinstance(moved, list) else []
    names = MentionName.objects.filter(project_id=project_id, id__in=ids, entity_id=uuid.UUID(keep_id))
    names.update(entity_id=uuid.UUID(merged_id))


# The mention index's names follow merge_entities and its undo (``graph_tools/merges.py``).
MENTION_NAMES_FOLLOW_MERGES = MergeFollower("mention_names", _names_merged, _names_unmerged)

"""Import a graph from JSON Lines (PROTOCOL §5b): upsert by key, all or nothing."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection, transaction

from apps.core.inputs import InvalidInput, json_parse
from apps.graph_tools.embeddings import get_embedder, graph_objects_embed
from apps.graph_tools.errors import GraphImportError
from apps.graph_tools.models import (
    IMPORT_ENTITY,
    IMPORT_RELATIONSHIP,
    ChangeAuthority,
    GraphChange,
    GraphObject,
    GraphRelationship,
)
from apps.graph_tools.selectors import EmbeddingProgress, embedding_progress
from apps.graph_tools.versions import graph_version_bump
from apps.projects.models import Project

log = logging.getLogger("kgchat.import")

MAX_KEY = 512
MAX_TYPE = 128
MAX_NAME = 512


@dataclass
class ImportResult:
    entities_created: int = 0
    entities_updated: int = 0
    relationships_created: int = 0
    relationships_updated: int = 0
    entities_embedded: int = 0
    # The graph version the import made (None: the file had no records, nothing was written).
    graph_version: int | None = None
    entity_ids: list[Any] = field(default_factory=list)
    # The project's embedding progress right after the commit (the background worker embeds the rest).
    embedding: EmbeddingProgress | None = None

    def as_counts(self) -> dict[str, int]:
        return {
            "entitiesCreated": self.entities_created,
            "entitiesUpdated": self.entities_updated,
            "relationshipsCreated": self.relationships_created,
            "relationshipsUpdated": self.relationships_updated,
            "entitiesEmbedded": self.entities_embedded,
        }


@dataclass
class _Entity:
    line: int
    key: str
    type: str
    name: str
    description: str
    properties: dict[str, Any]


@dataclass
class _Relationship:
    line: int
    type: str
    src: str
    dst: str
    properties: dict[str, Any]


def _text(record: dict[str, Any], name: str, line: int, *, required: bool, max_len: int | None = None) -> str:
    value = record.get(name)
    if value is None:
        if required:
            raise GraphImportError(f"missing field {name!r}", line=line)
        return ""
    if not isinstance(value, str):
        raise GraphImportError(f"field {name!r} must be a string", line=line)
    value = value.strip()
    if required and not value:
        raise GraphImportError(f"field {name!r} must not be empty", line=line)
    if max_len is not None and len(value) > max_len:
        raise GraphImportError(f"field {name!r} is longer than {max_len} characters", line=line)
    return value


def _properties(record: dict[str, Any], line: int) -> dict[str, Any]:
    value = record.get("properties", {})
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise GraphImportError("field 'properties' must be an object", line=line)
    return value


def parse_lines(lines: Iterable[str | bytes]) -> tuple[list[_Entity], list[_Relationship]]:
    entities: dict[str, _Entity] = {}
    relationships: dict[tuple[str, str, str], _Relationship] = {}
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json_parse(raw, what="the line")
        except InvalidInput as exc:
            raise GraphImportError(exc.message, line=number) from None
        if not isinstance(record, dict):
            raise GraphImportError("each line must be a JSON object", line=number)
        kind = record.get("kind")
        if kind == "entity":
            key = _text(record, "key", number, required=True, max_len=MAX_KEY)
            entities[key] = _Entity(
                line=number,
                key=key,
                type=_text(record, "type", number, required=True, max_len=MAX_TYPE),
                name=_text(record, "name", number, required=True, max_len=MAX_NAME),
                description=_text(record, "description", number, required=False),
                properties=_properties(record, number),
            )
        elif kind == "relationship":
            rel = _Relationship(
                line=number,
                type=_text(record, "type", number, required=True, max_len=MAX_TYPE),
                src=_text(record, "src", number, required=True, max_len=MAX_KEY),
                dst=_text(record, "dst", number, required=True, max_len=MAX_KEY),
                properties=_properties(record, number),
            )
            relationships[(rel.src, rel.type, rel.dst)] = rel
        elif kind is None:
            raise GraphImportError('missing field \'kind\' ("entity" or "relationship")', line=number)
        else:
            raise GraphImportError(
                f'unknown kind {kind!r} (expected "entity" or "relationship")', line=number
            )
    return list(entities.values()), list(relationships.values())


BATCH = 2000


# Namespace of the transaction-level advisory locks that make imports of one project take turns.
IMPORT_LOCK_NAMESPACE = 0x6B67  # "kg"


def project_write_turn(project_id: Any) -> None:
    """Wait until no other import or write tool of the project is running (held until this
    transaction ends).

    Imports of a project wait for each other on its type counts anyway (migration 0005); an
    import of several batches could otherwise take those rows in a different order than another
    import and deadlock with it. Write tools take the same turn, so what they planned stays true
    until they have written it.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [IMPORT_LOCK_NAMESPACE, str(project_id)]
        )


@transaction.atomic
def graph_import(
    *, project: Project, lines: Iterable[str | bytes], user_id: int | None = None
) -> ImportResult:
    """Upsert the entities and relationships of a JSON Lines file into ``project``.

    Entities are matched by ``key``, relationships by (src, type, dst). A relationship may name
    entities defined anywhere in the same file or already in the project. Any invalid line
    raises ``GraphImportError`` with its line number and nothing is kept. An import that upserts
    anything bumps the graph version once and records a change per entity and relationship
    (``user_id``: who imported, None for operators).
    """
    entities, relationships = parse_lines(lines)
    project_write_turn(project.id)
    result = ImportResult()
    keys = [e.key for e in entities]
    _entities_upsert(project=project, entities=entities, result=result)
    ids = _ids_of_keys(
        project=project, keys={r.src for r in relationships} | {r.dst for r in relationships} | set(keys)
    )
    for rel in relationships:
        for end in (rel.src, rel.dst):
            if end not in ids:
                raise GraphImportError(
                    f"relationship {rel.type!r} refers to unknown entity key {end!r}", line=rel.line
                )
    _relationships_upsert(project=project, relationships=relationships, ids=ids, result=result)
    result.entity_ids = [ids[k] for k in keys]
    if entities or relationships:
        result.graph_version = _record_import(
            project=project, result=result, relationships=relationships, ids=ids, user_id=user_id
        )
    return result


def _entities_upsert(*, project: Project, entities: list[_Entity], result: ImportResult) -> None:
    """Insert or update the entities by key, counting which existed; stale vectors go first."""
    keys = [e.key for e in entities]
    existing: set[str] = set()
    for start in range(0, len(keys), BATCH):
        existing.update(
            GraphObject.objects.filter(project=project, key__in=keys[start : start + BATCH]).values_list(
                "key", flat=True
            )
        )
    result.entities_updated = len(existing)
    result.entities_created = len(entities) - len(existing)
    for start in range(0, len(entities), BATCH):
        _stale_vectors_clear(project_id=project.id, entities=entities[start : start + BATCH])
    for start in range(0, len(entities), BATCH):
        chunk = entities[start : start + BATCH]
        GraphObject.objects.bulk_create(
            [
                GraphObject(
                    project=project,
                    key=e.key,
                    type=e.type,
                    name=e.name,
                    description=e.description,
                    properties=e.properties,
                )
                for e in chunk
            ],
            update_conflicts=True,
            unique_fields=["project", "key"],
            update_fields=["type", "name", "description", "properties", "updated_at"],
        )


def _ids_of_keys(*, project: Project, keys: set[str]) -> dict[str, Any]:
    """The ids of the project's entities with these keys (a key not found is absent)."""
    ids: dict[str, Any] = {}
    needed_list = sorted(keys)
    for start in range(0, len(needed_list), BATCH):
        ids.update(
            GraphObject.objects.filter(
                project=project, key__in=needed_list[start : start + BATCH]
            ).values_list("key", "id")
        )
    return ids


def _relationships_upsert(
    *, project: Project, relationships: list[_Relationship], ids: dict[str, Any], result: ImportResult
) -> None:
    """Insert or update the relationships by (src, type, dst), counting which existed."""
    pairs = {(ids[r.src], r.type, ids[r.dst]) for r in relationships}
    existing_rels = 0
    pair_list = list(pairs)
    for start in range(0, len(pair_list), BATCH):
        pair_chunk = pair_list[start : start + BATCH]
        srcs = {p[0] for p in pair_chunk}
        found = set(
            GraphRelationship.objects.filter(project=project, src_id__in=srcs).values_list(
                "src_id", "type", "dst_id"
            )
        )
        existing_rels += len(found & set(pair_chunk))
    result.relationships_updated = existing_rels
    result.relationships_created = len(relationships) - existing_rels
    for start in range(0, len(relationships), BATCH):
        GraphRelationship.objects.bulk_create(
            [
                GraphRelationship(
                    project=project,
                    type=r.type,
                    src_id=ids[r.src],
                    dst_id=ids[r.dst],
                    properties=r.properties,
                )
                for r in relationships[start : start + BATCH]
            ],
            update_conflicts=True,
            unique_fields=["src", "type", "dst"],
            update_fields=["properties", "updated_at"],
        )


def _stale_vectors_clear(*, project_id: Any, entities: list[_Entity]) -> None:
    """Drop the vectors of existing entities whose embedded text (type, name, description) the
    import changes, so the background worker embeds them again; unchanged entities keep theirs."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH stale AS (
                UPDATE kb.graph_objects AS o SET embedding_pending = true
                FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]) AS n(key, type, name, description)
                WHERE o.project_id = %s AND o.key = n.key AND NOT o.embedding_pending
                  AND (o.type, o.name, o.description) IS DISTINCT FROM (n.type, n.name, n.description)
                RETURNING o.id
            )
            DELETE FROM kb.graph_object_embeddings e USING stale WHERE e.object_id = stale.id
            """,
            [
                [e.key for e in entities],
                [e.type for e in entities],
                [e.name for e in entities],
                [e.description for e in entities],
                project_id,
            ],
        )


def _record_import(
    *,
    project: Project,
    result: ImportResult,
    relationships: list[_Relationship],
    ids: dict[str, Any],
    user_id: int | None,
) -> int:
    """Bump the graph version and record one change per upserted entity and relationship."""
    version = graph_version_bump(project_id=project.id)
    common = {"project": project, "version": version, "user_id": user_id, "authority": ChangeAuthority.IMPORT}
    changes = [GraphChange(action=IMPORT_ENTITY, entity_id=i, **common) for i in result.entity_ids]
    changes += [
        GraphChange(
            action=IMPORT_RELATIONSHIP,
            src_id=ids[r.src],
            dst_id=ids[r.dst],
            after={"type": r.type, "src_key": r.src, "dst_key": r.dst},
            **common,
        )
        for r in relationships
    ]
    GraphChange.objects.bulk_create(changes, batch_size=BATCH)
    return version


def graph_import_embed(*, project_id: Any, result: ImportResult, progress: Any = None) -> int:
    """Embed the entities an import upserted now, in this thread (outside its transaction, so the
    model holds no locks), for callers that need every vector before they go on (evals).

    A failure of the embedding model does not undo the import: it is logged, and the entities are
    left to the background worker. Return how many entities were embedded.
    """
    try:
        return graph_objects_embed(project_id=project_id, object_ids=result.entity_ids, progress=progress)
    except Exception:
        log.exception(
            "embedding %d imported entities failed; the background worker retries", len(result.entity_ids)
        )
        return 0


def graph_import_with_progress(
    *, project: Project, lines: Iterable[str | bytes], user_id: int | None = None
) -> ImportResult:
    """Import, and report the project's embedding progress after the commit.

    Nothing is embedded here: the import returns when its rows are committed, searchable by full
    text and name at once; the background worker (``embed_worker``) embeds them.
    """
    result = graph_import(project=project, lines=lines, user_id=user_id)
    result.embedding = embedding_progress(project_id=project.id, model=get_embedder().name)
    return result


async def graph_import_async(
    *, project: Project, lines: Iterable[str | bytes], user_id: int | None = None
) -> ImportResult:
    """``graph_import_with_progress`` in Django's sync thread, for async transports."""
    return await sync_to_async(graph_import_with_progress)(project=project, lines=lines, user_id=user_id)

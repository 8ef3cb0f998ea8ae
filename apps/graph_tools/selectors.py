"""Reads of the graph for REST browsing, and the one id-or-key resolver of entities.

The tools have their own, faster queries (``graph_queries``, ``search``) but name entities through
``entity_resolve`` too; the read tools through ``entity_resolve_following``, which also follows a
merged entity's id or key to the entity it went into. Reads a member makes take the principal and
check it here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from apps.graph_tools.embedders import get_embedder
from apps.graph_tools.errors import ApprovalNotFound, EntityNotFound
from apps.graph_tools.models import (
    ApprovalStatus,
    EntityRedirect,
    GraphChange,
    GraphObject,
    GraphRelationship,
    WriteApproval,
)
from apps.graph_tools.names import ALIAS_MATCH
from apps.graph_tools.ontology.document import ontology_parse
from apps.graph_tools.registry import GraphTool, GraphVocabulary, tool_list
from apps.graph_tools.search import ENTITY_COLUMNS, entity_row, json_value
from apps.projects.models import ProjectMembership, Role
from apps.projects.selectors import ROLE_RANK, Principal, parse_uuid, project_get, project_list


def _entities(project_id: uuid.UUID) -> QuerySet[GraphObject]:
    return GraphObject.objects.filter(project_id=project_id).defer("search_vector")


def entity_resolve(*, project_id: uuid.UUID, ref: str) -> dict[str, Any]:
    """Return the project's entity whose id or import key is ``ref`` (an id wins over a key), as tools
    show it: ``id``, ``key``, ``type``, ``name``, ``description``, ``properties``.

    One round trip and no ORM: every graph tool that names an entity starts here.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT {ENTITY_COLUMNS}, o.properties FROM kb.graph_objects o
                WHERE o.project_id = %(project)s AND (o.key = %(ref)s OR o.id = %(id)s)
                ORDER BY (o.id = %(id)s) DESC NULLS LAST LIMIT 1""",
            {"project": project_id, "ref": ref, "id": parse_uuid(ref)},
        )
        row = cursor.fetchone()
    if row is None:
        raise EntityNotFound(f"entity {ref!r} not found (give an entity id or key from a search result)")
    return {**entity_row(row), "properties": json_value(row[5])}


def entity_list(
    *, principal: Principal, project_ref: object, type: str | None = None, q: str | None = None
) -> QuerySet[GraphObject]:
    """The entities of a project the principal may see, by type and/or a substring of name, key or
    description."""
    project = project_get(principal=principal, project_ref=project_ref)
    qs = _entities(project.id)
    if type:
        qs = qs.filter(type=type)
    if q:
        qs = qs.filter(Q(name__icontains=q) | Q(key__icontains=q) | Q(description__icontains=q))
    return qs.order_by("type", "name", "key")


@dataclass(frozen=True)
class EntityEdge:
    id: uuid.UUID
    type: str
    direction: str  # "out": the entity is the source; "in": the target
    other: GraphObject
    properties: dict[str, Any]


@dataclass(frozen=True)
class EntityDetail:
    entity: GraphObject
    edges: list[EntityEdge]
    # The ref asked for, when it named an entity merged into this one (else None).
    merged_from: str | None = None


MAX_REDIRECT_HOPS = 8


def entity_redirect_target(*, project_id: uuid.UUID, ref: str) -> dict[str, Any] | None:
    """The entity that an entity merged away (``merge_entities``) now stands for, found by the merged
    entity's id or key, following later merges of the entity it went into; None when ``ref`` names
    no merged entity (or the chain ends at an entity that is gone)."""
    found = parse_uuid(ref)
    redirect = (
        EntityRedirect.objects.filter(project_id=project_id)
        .filter(Q(merged_id=found) if found else Q(merged_key=ref))
        .order_by("-created_at")
        .first()
    )
    for _ in range(MAX_REDIRECT_HOPS):
        if redirect is None:
            return None
        try:
            return entity_resolve(project_id=project_id, ref=str(redirect.into))
        except EntityNotFound:
            redirect = EntityRedirect.objects.filter(project_id=project_id, merged_id=redirect.into).first()
    return None


def entity_resolve_following(*, project_id: uuid.UUID, ref: str) -> tuple[dict[str, Any], str | None]:
    """The entity ``ref`` names (id or key), or the one it was merged into (an old answer's citation,
    ``entity_redirect_target``), with the ref that led there when it was merged; ``EntityNotFound``."""
    try:
        return entity_resolve(project_id=project_id, ref=ref), None
    except EntityNotFound:
        target = entity_redirect_target(project_id=project_id, ref=ref)
        if target is None:
            raise
        return target, ref


def merged_from_noted(result: dict[str, Any], merged_from: str | None) -> dict[str, Any]:
    """A read tool's ``result`` saying, when its entity argument named an entity since merged into
    the one it answers for (``entity_resolve_following``), which ref that was: ``merged_from``
    (absent otherwise, so a model reads nothing more for a live entity)."""
    return result if merged_from is None else {**result, "merged_from": merged_from}


def entity_detail(*, principal: Principal, project_ref: object, ref: str, limit: int = 200) -> EntityDetail:
    """One entity of a project the principal may see, with its relationships in both directions.

    A ref of an entity merged into another (an old answer's citation) gives that other entity, with
    ``merged_from`` saying which ref led there."""
    project = project_get(principal=principal, project_ref=project_ref)
    found, merged_from = entity_resolve_following(project_id=project.id, ref=ref)
    entity = _entities(project.id).get(id=found["id"])
    out = (
        GraphRelationship.objects.filter(src=entity)
        .select_related("dst")
        .defer("dst__search_vector")
        .order_by("type", "dst__name")[:limit]
    )
    inc = (
        GraphRelationship.objects.filter(dst=entity)
        .select_related("src")
        .defer("src__search_vector")
        .order_by("type", "src__name")[:limit]
    )
    edges = [EntityEdge(r.id, r.type, "out", r.dst, r.properties) for r in out]
    edges += [EntityEdge(r.id, r.type, "in", r.src, r.properties) for r in inc]
    return EntityDetail(entity=entity, edges=edges, merged_from=merged_from)


def graph_vocabulary(*, project_id: uuid.UUID) -> GraphVocabulary:
    """The project's entity types and (relationship type, source type, target type) triples: its
    ontology's when it has one (#51: extraction's schema, ``query_paths``' enums and its type checks
    follow it), else those its graph has.

    One round trip over the ontology's row and the per-project type counts, which triggers keep
    exact: no part of the graph is scanned.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT
                   (SELECT document FROM kb.graph_ontologies WHERE project_id = %(p)s),
                   ARRAY(SELECT type FROM kb.graph_entity_type_counts WHERE project_id = %(p)s ORDER BY type),
                   ARRAY(SELECT ARRAY[type, src_type, dst_type] FROM kb.graph_relationship_type_counts
                         WHERE project_id = %(p)s ORDER BY type, src_type, dst_type)""",
            {"p": project_id},
        )
        document, entity_types, triples = cursor.fetchone()
    if document is not None:
        return ontology_parse(json_value(document)).vocabulary()
    return GraphVocabulary(
        entity_types=tuple(entity_types), relationships=tuple((t[0], t[1], t[2]) for t in triples or [])
    )


# Bounds of ``relationship_value_names``: relationship types read, relationships scanned of each.
VALUE_TYPES_MAX = 64
VALUE_SCAN_MAX = 5000


def relationship_value_names(*, project_id: uuid.UUID, per_type: int = 30) -> dict[str, tuple[str, ...]]:
    """For each of the project's relationship types, the names of the entities it reaches most
    often (its targets), most reached first: a few of its values ("HAS_GENRE": Drama, Comedy…).

    Bounded: at most ``VALUE_TYPES_MAX`` relationship types, ``VALUE_SCAN_MAX`` relationships of
    each counted (not the whole graph), ``per_type`` names each. One round trip, parameterised."""
    per_type = max(1, min(int(per_type), 100))
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT t.type, o.name
                 FROM (SELECT DISTINCT type FROM kb.graph_relationship_type_counts
                        WHERE project_id = %(p)s ORDER BY type LIMIT %(types)s) t
                 CROSS JOIN LATERAL (
                     SELECT s.dst_id, count(*) AS n
                       FROM (SELECT r.dst_id FROM kb.graph_relationships r
                              WHERE r.project_id = %(p)s AND r.type = t.type LIMIT %(scan)s) s
                      GROUP BY s.dst_id ORDER BY n DESC, s.dst_id LIMIT %(per)s) top
                 JOIN kb.graph_objects o ON o.id = top.dst_id
                ORDER BY t.type, top.n DESC, o.name""",
            {"p": project_id, "types": VALUE_TYPES_MAX, "scan": VALUE_SCAN_MAX, "per": per_type},
        )
        rows = cursor.fetchall()
    found: dict[str, list[str]] = {}
    for rel_type, name in rows:
        found.setdefault(rel_type, []).append(name)
    return {t: tuple(names) for t, names in found.items()}


@dataclass(frozen=True)
class ProjectTool:
    """A graph tool as one project's clients see it: its schema narrowed to the project's types."""

    tool: GraphTool
    input_schema: dict[str, Any]


def project_tools(*, project_id: uuid.UUID, tools: Iterable[GraphTool] | None = None) -> list[ProjectTool]:
    """``tools`` (default: the whole registry) with their schemas for this project; the project's
    types are read (one round trip) only when a tool's schema depends on them."""
    chosen = list(tool_list() if tools is None else tools)
    vocabulary = graph_vocabulary(project_id=project_id) if any(t.per_project for t in chosen) else None
    return [ProjectTool(tool=t, input_schema=t.input_schema(vocabulary)) for t in chosen]


def tool_list_for(*, principal: Principal, project_ref: object) -> list[ProjectTool]:
    """The graph tools a member of the project may call (all of them, to every member), with the
    project's schemas."""
    project = project_get(principal=principal, project_ref=project_ref)
    return project_tools(project_id=project.id)


def approval_allowed(*, principal: Principal, project_id: uuid.UUID) -> bool:
    """Whether the principal may approve (and directly run) graph writes in the project: editors and
    owners may, viewers and non-members may not."""
    if principal.token_project_id is not None and principal.token_project_id != project_id:
        return False
    role = (
        ProjectMembership.objects.filter(project_id=project_id, user_id=principal.user_id)
        .values_list("role", flat=True)
        .first()
    )
    return role is not None and ROLE_RANK[Role(role)] >= ROLE_RANK[Role.EDITOR]


def graph_changes_since(
    *, project_id: uuid.UUID, version: int, entity_ids: Iterable[uuid.UUID | str]
) -> list[GraphChange]:
    """The changes after graph version ``version`` that touched any of ``entity_ids``: the entity
    itself (created, updated, deleted, imported) or a relationship at either of its ends. Oldest
    first. One query, served by the (entity_id|src_id|dst_id, version) indexes."""
    ids = [i for i in (parse_uuid(e) for e in entity_ids) if i is not None]
    if not ids:
        return []
    return list(
        GraphChange.objects.filter(project_id=project_id, version__gt=version)
        .filter(Q(entity_id__in=ids) | Q(src_id__in=ids) | Q(dst_id__in=ids))
        .order_by("version", "id")
    )


def entity_history(*, principal: Principal, project_ref: object, ref: str) -> QuerySet[GraphChange]:
    """The change history of one entity of a project the principal may see, newest first: its own
    changes and those of relationships at its ends. ``ref`` is an id or key; a deleted entity is
    found by its id. The caller pages it (and counts the whole list)."""
    project = project_get(principal=principal, project_ref=project_ref)
    try:
        entity_id: uuid.UUID | None = uuid.UUID(entity_resolve(project_id=project.id, ref=ref)["id"])
    except EntityNotFound:
        entity_id = parse_uuid(ref)
        if entity_id is None or not GraphChange.objects.filter(project=project, entity_id=entity_id).exists():
            raise
    return (
        GraphChange.objects.filter(project=project)
        .filter(Q(entity_id=entity_id) | Q(src_id=entity_id) | Q(dst_id=entity_id))
        .select_related("user", "approval__decided_by")
        .order_by("-version", "-id")
    )


def approval_get(*, principal: Principal, approval_id: object) -> WriteApproval:
    """An approval of a project the principal is a member of (``ApprovalNotFound`` otherwise)."""
    approval_uuid = parse_uuid(approval_id)
    approval = (
        WriteApproval.objects.filter(id=approval_uuid, project__in=project_list(principal=principal)).first()
        if approval_uuid
        else None
    )
    if approval is None:
        raise ApprovalNotFound(f"approval {approval_id!s} not found")
    return approval


def approvals_pending(*, conversation_id: uuid.UUID) -> list[WriteApproval]:
    """The pending approvals of a conversation, oldest first (expired ones included until
    ``approvals_expire`` marks them)."""
    return list(
        WriteApproval.objects.filter(conversation_id=conversation_id, status=ApprovalStatus.PENDING).order_by(
            "created_at"
        )
    )


def approvals_of_conversation(*, conversation_id: uuid.UUID) -> list[WriteApproval]:
    """Every approval proposed in a conversation, oldest first."""
    return list(WriteApproval.objects.filter(conversation_id=conversation_id).order_by("created_at"))


def approval_result(approval: WriteApproval) -> dict[str, Any]:
    """What the proposing agent is told about a decided (or expired) approval: the tool result of
    the approved write, or ``{"error", "code"}`` (declined with the reason, expired, or a write the
    graph outgrew)."""
    if approval.status == ApprovalStatus.EXPIRED:
        return {
            "error": "nobody decided on this change before it expired; nothing was written",
            "code": "approval_expired",
        }
    if isinstance(approval.result, dict):
        return approval.result
    return {"error": f"this change is {approval.status}; nothing was written", "code": "approval_pending"}


def approvals_waiting(*, conversation_id: uuid.UUID) -> list[WriteApproval]:
    """The approvals of a conversation still open to a decision: pending and not yet expired."""
    return list(
        WriteApproval.objects.filter(
            conversation_id=conversation_id, status=ApprovalStatus.PENDING, expires_at__gt=timezone.now()
        ).order_by("created_at")
    )


@dataclass(frozen=True)
class EmbeddingProgress:
    """How far the background worker is with a project's vectors (``embedding_progress``)."""

    total: int
    embedded: int
    pending: int
    model: str

    @property
    def state(self) -> str:
        """``complete`` when nothing waits for a vector, else ``pending``."""
        return "pending" if self.pending else "complete"

    def as_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "embedded": self.embedded,
            "pending": self.pending,
            "state": self.state,
            "model": self.model,
        }


def embedding_progress(*, project_id: uuid.UUID, model: str) -> EmbeddingProgress:
    """Count a project's entities: all, with a vector of ``model``, and waiting for one (no vector).

    Vectors of another model are neither embedded nor pending: ``embed_graph --all`` replaces them.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), (SELECT count(*) FROM kb.graph_object_embeddings "
            "                  WHERE project_id = %(project)s AND model = %(model)s), "
            "count(*) FILTER (WHERE embedding_pending) FROM kb.graph_objects WHERE project_id = %(project)s",
            {"model": model, "project": project_id},
        )
        total, embedded, pending = cursor.fetchone()
    return EmbeddingProgress(total=total, embedded=embedded, pending=pending, model=model)


# The search tools' count of pending entities stops here: a fresh import of a million entities
# would otherwise cost every search a scan of them all (4,020 pending rows: 1 ms; docs/protocol.md §6).
PENDING_COUNT_CAP = 10_000


def embedding_pending_count(*, project_id: uuid.UUID, cap: int = PENDING_COUNT_CAP) -> int:
    """Count a project's entities waiting for a vector, as ``embedding_progress`` counts ``pending``,
    up to ``cap``.

    The search tools add it to their results. Once a project is embedded it is an index-only scan
    of the partial index ``graph_obj_embed_pending``, which then holds none of its rows.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM (SELECT FROM kb.graph_objects WHERE project_id = %s AND embedding_pending"
            " LIMIT %s) AS pending",
            [project_id, cap],
        )
        count: int = cursor.fetchone()[0]
    return count


def embedding_status(*, principal: Principal, project_ref: object) -> EmbeddingProgress:
    """The embedding progress of a project the principal may see, for the configured model."""
    project = project_get(principal=principal, project_ref=project_ref)
    return embedding_progress(project_id=project.id, model=get_embedder().name)


# At most this many entities are read for the names of one ``entities_named`` call.
NAMED_ROWS_MAX = 500


def entities_named(*, project_id: uuid.UUID, names: Iterable[str]) -> dict[str, set[str]]:
    """The ids of the project's entities named (or known by an alias) exactly one of ``names``,
    case aside, by that lower-cased name. One round trip whatever the graph's size: two selects,
    each served by its own index (``lower(name)``; the aliases' partial GIN index), never a scan of
    the names."""
    wanted = sorted({n.lower() for n in names if n.strip()})
    if not wanted:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""(SELECT o.id, lower(o.name), ARRAY[]::text[] FROM kb.graph_objects o
                 WHERE o.project_id = %(project)s AND lower(o.name) = ANY(%(names)s) LIMIT {NAMED_ROWS_MAX})
                UNION ALL
                (SELECT o.id, lower(o.name), kb.entity_aliases(o.properties) FROM kb.graph_objects o
                 WHERE o.project_id = %(project)s AND {ALIAS_MATCH.format(names="%(names)s")}
                 LIMIT {NAMED_ROWS_MAX})""",
            {"project": project_id, "names": wanted},
        )
        rows = cursor.fetchall()
    found: dict[str, set[str]] = {}
    chosen = set(wanted)
    for entity_id, name, aliases in rows:
        for matched in {name, *(aliases or ())} & chosen:
            found.setdefault(matched, set()).add(str(entity_id))
    return found

"""Reads of the graph pages (#51): the types with their counts, the entity list a page at a time
and search, and one entity's page. Every read is bounded by an index and a limit, so the pages
stay as fast on a graph of a million entities as on a small one."""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Q

from apps.curation.queues import InvalidCursor
from apps.graph_tools.models import EntityRedirect, EntityTypeCount, GraphObject, RelationshipTypeCount
from apps.graph_tools.search import ENTITY_COLUMNS, entity_row, text_search
from apps.graph_tools.selectors import MAX_REDIRECT_HOPS, entity_resolve_following
from apps.projects.models import Project
from apps.projects.selectors import Principal, project_get

LIST_PAGE = 50
SEARCH_MAX = 50
MAX_QUERY = 1000

# An answer's citation links ("[Ada](entity:<id>)", "[doc](passage:<id>)"), shown as their names.
_LINK = re.compile(r"\[([^\]]+)\]\((?:entity|passage):[^)\s]+\)")


@dataclass(frozen=True)
class GraphOverview:
    project: Project
    entity_types: list[tuple[str, int]]
    relationship_types: list[tuple[str, int]]
    entities: int
    relationships: int


def graph_overview(*, principal: Principal, project_ref: object) -> GraphOverview:
    """The project's entity and relationship types with their counts (the trigger-kept counts:
    no scan of the graph)."""
    project = project_get(principal=principal, project_ref=project_ref)
    entity_types = list(
        EntityTypeCount.objects.filter(project_id=project.id)
        .order_by("-count", "type")
        .values_list("type", "count")
    )
    relationship_types: dict[str, int] = {}
    for rel_type, count in RelationshipTypeCount.objects.filter(project_id=project.id).values_list(
        "type", "count"
    ):
        relationship_types[rel_type] = relationship_types.get(rel_type, 0) + count
    return GraphOverview(
        project=project,
        entity_types=entity_types,
        relationship_types=sorted(relationship_types.items(), key=lambda tc: (-tc[1], tc[0])),
        entities=sum(c for _, c in entity_types),
        relationships=sum(relationship_types.values()),
    )


def _list_cursor(name: str, entity_id: str) -> str:
    raw = json.dumps({"n": name, "i": entity_id}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _list_cursor_read(text: str) -> tuple[str, uuid.UUID]:
    try:
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        return str(data["n"])[:MAX_QUERY], uuid.UUID(str(data["i"]))
    except (binascii.Error, ValueError, UnicodeDecodeError, KeyError, TypeError):
        raise InvalidCursor("after: not a cursor this list gave") from None


@dataclass(frozen=True)
class EntityListPage:
    items: list[dict[str, Any]]
    next_cursor: str | None


def entity_list_page(
    *, project_id: uuid.UUID, type: str | None = None, after: str | None = None, limit: int = LIST_PAGE
) -> EntityListPage:
    """The project's entities (of ``type``) by name, case aside, then id: ``limit`` of them after
    the cursor ``after``. Keyset paging over ``(project_id[, type], lower(name))``."""
    params: dict[str, Any] = {"p": project_id, "limit": limit + 1, "type": type}
    where = "o.project_id = %(p)s" + (" AND o.type = %(type)s" if type else "")
    if after:
        params["name"], params["id"] = _list_cursor_read(after)
        # The first term is what the index's range scan starts from; the row comparison breaks ties.
        where += " AND lower(o.name) >= %(name)s AND (lower(o.name), o.id) > (%(name)s, %(id)s)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT {ENTITY_COLUMNS}, lower(o.name) FROM kb.graph_objects o WHERE {where}
                ORDER BY lower(o.name), o.id LIMIT %(limit)s""",
            params,
        )
        rows = cursor.fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = _list_cursor(rows[-1][5], str(rows[-1][0])) if more else None
    return EntityListPage(items=[entity_row(r) for r in rows], next_cursor=next_cursor)


def entity_search(*, project_id: uuid.UUID, q: str, type: str | None = None) -> list[dict[str, Any]]:
    """The best ``SEARCH_MAX`` entities for ``q`` (the ``search_entities`` tool's search: full
    text, the name as a substring, aliases; exact names first)."""
    return text_search(project_id=project_id, query=q[:MAX_QUERY], type=type or None, limit=SEARCH_MAX)


# The entity page's bounds: relationships read each way, shown per group, passages, answers.
EDGES_SCANNED = 5000
EDGES_PER_GROUP = 20
PASSAGES_SHOWN = 20
ANSWERS_SHOWN = 20
SNIPPET_CHARS = 120
MERGED_MAX = 50


@dataclass(frozen=True)
class RelationshipGroup:
    type: str
    direction: str  # "out": the entity is the source; "in": the target
    count: int
    capped: bool
    items: list[dict[str, Any]]


def relationship_groups(*, entity_id: uuid.UUID) -> list[RelationshipGroup]:
    """The entity's relationships by type and direction: each group's count (of the first
    ``EDGES_SCANNED`` each way) and its first ``EDGES_PER_GROUP`` by the other end's name."""
    sides = {"out": ("src_id", "dst_id"), "in": ("dst_id", "src_id")}
    groups: list[RelationshipGroup] = []
    with connection.cursor() as cursor:
        for direction, (mine, other) in sides.items():
            cursor.execute(
                f"""SELECT r.type, r.id, o.id, o.key, o.type, o.name
                    FROM (SELECT r0.id, r0.type, r0.src_id, r0.dst_id FROM kb.graph_relationships r0 WHERE r0.{mine} = %(e)s LIMIT %(scan)s) r
                    JOIN kb.graph_objects o ON o.id = r.{other}
                    ORDER BY r.type, lower(o.name), o.id""",
                {"e": entity_id, "scan": EDGES_SCANNED},
            )
            rows = cursor.fetchall()
            capped = len(rows) >= EDGES_SCANNED
            by_type: dict[str, list[tuple[Any, ...]]] = {}
            for row in rows:
                by_type.setdefault(row[0], []).append(row)
            for rel_type, members in by_type.items():
                items = [
                    {"id": str(r[1]), "other": {"id": str(r[2]), "key": r[3], "type": r[4], "name": r[5]}}
                    for r in members[:EDGES_PER_GROUP]
                ]
                groups.append(RelationshipGroup(rel_type, direction, len(members), capped, items))
    return sorted(groups, key=lambda g: (g.type, g.direction != "out"))


def passages_mentioning(*, project_id: uuid.UUID, entity_id: uuid.UUID) -> list[dict[str, Any]]:
    """The first ``PASSAGES_SHOWN`` passages whose mentions the mention index links to the entity
    (by its name or an alias), by document name and position, each with its first mention in
    context."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT DISTINCT ON (d.name, p.ordinal) p.id, p.ordinal, p.page, d.id, d.name, p.text,
                      m.char_start, m.char_end
               FROM kb.mention_names n
               JOIN kb.passage_mentions m ON m.mention_name_id = n.id
               JOIN kb.document_passages p ON p.id = m.passage_id
               JOIN kb.documents d ON d.id = p.document_id
               WHERE n.project_id = %s AND n.entity_id = %s
               ORDER BY d.name, p.ordinal, m.char_start LIMIT %s""",
            [project_id, entity_id, PASSAGES_SHOWN],
        )
        rows = cursor.fetchall()
    found = []
    for passage_id, ordinal, page, document_id, document_name, text, start, end in rows:
        found.append(
            {
                "id": str(passage_id),
                "ordinal": ordinal,
                "page": page,
                "documentId": str(document_id),
                "documentName": document_name,
                "before": ("…" if start > SNIPPET_CHARS else "")
                + text[max(0, start - SNIPPET_CHARS) : start],
                "surface": text[start:end],
                "after": text[end : end + SNIPPET_CHARS] + ("…" if len(text) > end + SNIPPET_CHARS else ""),
            }
        )
    return found


def answers_citing(
    *, principal: Principal, project_id: uuid.UUID, entity_id: uuid.UUID
) -> list[dict[str, Any]]:
    """The principal's own answers (conversations are their owner's) that cited the entity, or an
    entity merged into it, newest first, at most ``ANSWERS_SHOWN``: through the citations' GIN index
    (curation 0002)."""
    from apps.chat.models import Message, MessageRole

    cited = Q()
    for ref in [entity_id, *merged_into(project_id=project_id, entity_id=entity_id)]:
        cited |= Q(citations__contains=[{"id": str(ref)}])
    messages = (
        Message.objects.filter(
            cited,
            role=MessageRole.ASSISTANT,
            conversation__project_id=project_id,
            conversation__user_id=principal.user_id,
        )
        .select_related("conversation")
        .only("id", "content", "created_at", "conversation__id", "conversation__title")
        .order_by("-created_at")[:ANSWERS_SHOWN]
    )
    return [
        {
            "id": str(m.id),
            "conversationId": str(m.conversation.id),
            "conversationTitle": m.conversation.title or "Untitled conversation",
            "excerpt": " ".join(_LINK.sub(r"\1", m.content).split())[:200],
            "createdAt": m.created_at,
        }
        for m in messages
    ]


def entity_of_project(*, principal: Principal, project_ref: object, ref: str) -> tuple[Project, GraphObject]:
    """A project the principal is a member of and its entity by id or key, or the entity an entity
    merged away went into (``merge_entities``: an old link or citation); ``EntityNotFound``."""
    project = project_get(principal=principal, project_ref=project_ref)
    found, _ = entity_resolve_following(project_id=project.id, ref=ref)
    return project, GraphObject.objects.defer("search_vector").get(id=found["id"])


def merged_into(*, project_id: uuid.UUID, entity_id: uuid.UUID) -> list[uuid.UUID]:
    """The ids of the entities merged into this one, also through later merges (at most
    ``MERGED_MAX``, ``MAX_REDIRECT_HOPS`` deep): an old answer cited one of them."""
    found: list[uuid.UUID] = []
    frontier = [entity_id]
    for _ in range(MAX_REDIRECT_HOPS):
        frontier = list(
            EntityRedirect.objects.filter(project_id=project_id, into__in=frontier).values_list(
                "merged_id", flat=True
            )[: MERGED_MAX - len(found)]
        )
        found += frontier
        if not frontier or len(found) >= MERGED_MAX:
            break
    return found

"""Full-text search over my conversations: titles and the text of messages (PROTOCOL §2, ``?q=``).

PostgreSQL full text with the GIN expression indexes of migration 0007 (the expressions below
must stay identical to them). The query string is parsed as a web search
(``websearch_to_tsquery``): quotes make phrases, ``or`` and ``-`` work, and no input is a syntax
error. Conversations rank by their best matching title or message, then by recency.
"""

from __future__ import annotations

import html
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection

from apps.chat.models import Conversation
from apps.projects.selectors import Principal, project_list

# ts_headline marks matches with these private-use characters (removed from the text first), so
# the snippet can be HTML-escaped before the marks become <mark> tags.
_START, _STOP = "\ue000", "\ue001"
_HEADLINE_OPTIONS = f"StartSel={_START}, StopSel={_STOP}, MaxWords=30, MinWords=10"

_MATCHES = """
WITH q AS (SELECT websearch_to_tsquery('english'::regconfig, %(q)s) AS query),
mine AS (
    SELECT c.id, c.title, c.updated_at FROM "kb"."chat_conversations" c
    WHERE c.user_id = %(user_id)s AND c.project_id = ANY(%(project_ids)s::uuid[])
),
hits AS (
    SELECT mine.id AS cid, ts_rank(to_tsvector('english'::regconfig, mine.title), q.query) AS rank,
           mine.title AS body
    FROM mine, q WHERE to_tsvector('english'::regconfig, mine.title) @@ q.query
    UNION ALL
    SELECT m.conversation_id, ts_rank(to_tsvector('english'::regconfig, left(m.content, 100000)), q.query),
           left(m.content, 100000)
    FROM "kb"."chat_messages" m JOIN mine ON mine.id = m.conversation_id, q
    WHERE m.role IN ('user', 'assistant')
      AND to_tsvector('english'::regconfig, left(m.content, 100000)) @@ q.query
),
best AS (SELECT DISTINCT ON (cid) cid, rank, body FROM hits ORDER BY cid, rank DESC)
"""

_PAGE = (
    _MATCHES
    + """
SELECT best.cid,
       ts_headline('english'::regconfig, translate(best.body, %(marks)s, ''), q.query, %(options)s)
FROM best JOIN mine ON mine.id = best.cid, q
ORDER BY best.rank DESC, mine.updated_at DESC, best.cid
LIMIT %(limit)s OFFSET %(offset)s
"""
)

_COUNT = _MATCHES + "SELECT count(*) FROM best"


@dataclass(frozen=True)
class SearchHit:
    conversation: Conversation
    snippet: str  # HTML-escaped text; the only markup is <mark>…</mark> around matched words


def snippet_html(headline: str) -> str:
    """Escape a ts_headline result and turn its private-use marks into ``<mark>`` tags."""
    return html.escape(headline, quote=False).replace(_START, "<mark>").replace(_STOP, "</mark>")


def conversation_search(
    *, principal: Principal, q: str, project_id: uuid.UUID | None = None, limit: int, offset: int
) -> tuple[list[SearchHit], int]:
    """My conversations (in projects I can still see) whose title or messages match ``q``: one page and the total."""
    projects = project_list(principal=principal)
    if project_id is not None:
        projects = projects.filter(id=project_id)
    params: dict[str, Any] = {
        "q": q,
        "user_id": principal.user_id,
        "project_ids": [str(p) for p in projects.values_list("id", flat=True)],
        "marks": _START + _STOP,
        "options": _HEADLINE_OPTIONS,
        "limit": limit,
        "offset": offset,
    }
    with connection.cursor() as cursor:
        cursor.execute(_PAGE, params)
        rows = cursor.fetchall()
        cursor.execute(_COUNT, params)
        (total,) = cursor.fetchone() or (0,)
    by_id = Conversation.objects.in_bulk([row[0] for row in rows])
    hits = [SearchHit(conversation=by_id[cid], snippet=snippet_html(h)) for cid, h in rows if cid in by_id]
    return hits, int(total)

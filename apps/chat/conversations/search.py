"""Full-text search over my conversations: titles and the text of messages (PROTOCOL §2, ``?q=``).

PostgreSQL full text with the GIN indexes of migrations 0007 and 0012: the stored ``search_vector``
of messages and an expression index on titles (the title expression below is the index's, both
built by ``text_search.tsvector_sql``). The query string is parsed as a web search
(``websearch_to_tsquery``): quotes make phrases, ``or`` and ``-`` work, and no input is a syntax
error. Words in angle brackets ("List<String>") are words, as in every full-text search of kgchat
(``apps/graph_tools/text_search.py``). Conversations rank by their best matching title or
message, then by recency.
"""

from __future__ import annotations

import html
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection

from apps.chat.models import Conversation
from apps.graph_tools.text_search import headline_sql, tsvector_sql, websearch_tsquery_sql
from apps.projects.selectors import Principal, project_list

# ts_headline marks matches with these private-use characters (removed from the text first), so
# the snippet can be HTML-escaped before the marks become <mark> tags.
_START, _STOP = "\ue000", "\ue001"
_HEADLINE_OPTIONS = f"StartSel={_START}, StopSel={_STOP}, MaxWords=30, MinWords=10"
# ts_headline parses the text it shows with the default parser, which replaces "<String>" with a
# space as a tag. So the text it reads has its angle brackets as these control characters (blanks
# to the parser in every locale; any already there are removed first, with the marks): it finds
# the words search found between them, and the snippet shows the brackets again once escaped.
_LT, _GT = "\x01", "\x02"
_HEADLINE_FROM, _HEADLINE_TO = "<>" + _LT + _GT + _START + _STOP, _LT + _GT
_HEADLINE_TEXT = (
    "translate(left(coalesce(m.content, page.title), 100000), %(headline_from)s, %(headline_to)s)"
)

_MATCHES = f"""
WITH q AS (SELECT {websearch_tsquery_sql("%(q)s")} AS query),
mine AS (
    SELECT c.id, c.title, c.updated_at FROM "kb"."chat_conversations" c
    WHERE c.user_id = %(user_id)s AND c.project_id = ANY(%(project_ids)s::uuid[])
),
hits AS (
    SELECT mine.id AS cid, ts_rank({tsvector_sql("mine.title")}, q.query) AS rank,
           NULL::uuid AS msg_id
    FROM mine, q WHERE {tsvector_sql("mine.title")} @@ q.query
    UNION ALL
    SELECT m.conversation_id, ts_rank(m.search_vector, q.query), m.id
    FROM "kb"."chat_messages" m JOIN mine ON mine.id = m.conversation_id, q
    WHERE m.role IN ('user', 'assistant') AND m.search_vector @@ q.query
),
best AS (SELECT DISTINCT ON (cid) cid, rank, msg_id FROM hits ORDER BY cid, rank DESC)
"""

_PAGE = (
    _MATCHES
    + f"""
SELECT page.cid, page.total,
       {headline_sql(_HEADLINE_TEXT, "q.query", "%(options)s")}
FROM (
    SELECT best.cid, best.msg_id, best.rank, mine.title, mine.updated_at, count(*) OVER () AS total
    FROM best JOIN mine ON mine.id = best.cid
    ORDER BY best.rank DESC, mine.updated_at DESC, best.cid
    LIMIT %(limit)s OFFSET %(offset)s
) page
LEFT JOIN "kb"."chat_messages" m ON m.id = page.msg_id, q
ORDER BY page.rank DESC, page.updated_at DESC, page.cid
"""
)

_COUNT = _MATCHES + "SELECT count(*) FROM best"


@dataclass(frozen=True)
class SearchHit:
    conversation: Conversation
    snippet: str  # HTML-escaped text; the only markup is <mark>…</mark> around matched words


def snippet_html(headline: str) -> str:
    """Escape a ts_headline result, show its angle brackets again and turn its private-use marks into
    ``<mark>`` tags."""
    escaped = html.escape(headline, quote=False).replace(_LT, "&lt;").replace(_GT, "&gt;")
    return escaped.replace(_START, "<mark>").replace(_STOP, "</mark>")


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
        "headline_from": _HEADLINE_FROM,
        "headline_to": _HEADLINE_TO,
        "options": _HEADLINE_OPTIONS,
        "limit": limit,
        "offset": offset,
    }
    with connection.cursor() as cursor:
        cursor.execute(_PAGE, params)
        rows = cursor.fetchall()
        total = rows[0][1] if rows else 0
        if not rows and offset > 0:  # a page past the end still reports how many there are
            cursor.execute(_COUNT, params)
            (total,) = cursor.fetchone() or (0,)
    by_id = Conversation.objects.in_bulk([row[0] for row in rows])
    hits = [SearchHit(conversation=by_id[cid], snippet=snippet_html(h)) for cid, _, h in rows if cid in by_id]
    return hits, int(total)

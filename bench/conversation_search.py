"""Conversation search at scale: one user with many conversations and messages (plus another
user's, which the search must skip), p50/p95 of GET /api/chat/conversations?q= for a rare, a
common and a two-word query, and whether PostgreSQL's plan uses the GIN indexes.

Rows are generated in SQL inside a throw-away project and user, deleted at the end.

    BENCH_CONVERSATIONS=5000 BENCH_MESSAGES_PER_CONVERSATION=20 python -m bench conversation_search
"""

from __future__ import annotations

import os
import statistics
import time
import uuid

from django.contrib.auth import get_user_model
from django.db import connection

from apps.chat.conversations.search import conversation_search
from apps.graph_tools.text_search import websearch_tsquery_sql
from apps.projects.selectors import Principal
from apps.projects.services import project_create

CONVERSATIONS = int(os.environ.get("BENCH_CONVERSATIONS", "5000"))
PER_CONVERSATION = int(os.environ.get("BENCH_MESSAGES_PER_CONVERSATION", "20"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "30"))

# Words drawn with a skew: the first ones are common, "zeppelin" appears in about 1 message of 5,000.
FILL = """
INSERT INTO kb.chat_conversations (id, project_id, user_id, title, created_at, updated_at, known_entities,
                                   active_turn_worker, active_turn_text)
SELECT gen_random_uuid(), %(project)s, CASE WHEN g %% 10 = 0 THEN %(other)s ELSE %(user)s END,
       'conversation ' || g, now() - g * interval '1 minute', now() - g * interval '1 minute', '{}', '', ''
FROM generate_series(1, %(conversations)s) g;
INSERT INTO kb.chat_messages (id, conversation_id, role, content, tool_calls, citations, created_at)
SELECT gen_random_uuid(), c.id, CASE WHEN n %% 2 = 0 THEN 'user' ELSE 'assistant' END,
       (SELECT string_agg((ARRAY['graph','city','river','museum','bridge','coffee','harbour','castle',
                                 'festival','railway','zeppelin'])[1 + floor(power(random(), 3) * 10)::int
                                 + CASE WHEN random() < 0.0002 THEN 10 - floor(power(random(), 3) * 10)::int ELSE 0 END],
                          ' ')
        FROM generate_series(1, 40 + n)),
       '[]', '[]', c.created_at + n * interval '1 second'
FROM kb.chat_conversations c, generate_series(1, %(per)s) n
WHERE c.project_id = %(project)s;
ANALYZE kb.chat_conversations; ANALYZE kb.chat_messages;
"""


def _timed(principal: Principal, q: str) -> tuple[float, float, int]:
    times = []
    total = 0
    for _ in range(REPEAT):
        started = time.perf_counter()
        _, total = conversation_search(principal=principal, q=q, limit=50, offset=0)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1], total


def run() -> None:
    users = get_user_model().objects
    tag = uuid.uuid4().hex[:8]
    user = users.create_user(f"bench-search-{tag}")
    other = users.create_user(f"bench-search-other-{tag}")
    project = project_create(owner=user, name=f"bench search {tag}")
    try:
        started = time.monotonic()
        with connection.cursor() as cursor:
            cursor.execute(
                FILL,
                {
                    "project": str(project.id),
                    "user": user.pk,
                    "other": other.pk,
                    "conversations": CONVERSATIONS,
                    "per": PER_CONVERSATION,
                },
            )
        print(
            f"{CONVERSATIONS} conversations x {PER_CONVERSATION} messages generated in "
            f"{time.monotonic() - started:.1f} s"
        )
        principal = Principal(user=user)
        for q in ("zeppelin", "castle", '"graph city"', "coffee -graph"):
            p50, p95, total = _timed(principal, q)
            print(f"q={q!r:18} matches {total:6}  p50 {p50:7.1f} ms  p95 {p95:7.1f} ms")
        with connection.cursor() as cursor:
            cursor.execute(
                "EXPLAIN SELECT conversation_id FROM kb.chat_messages WHERE role IN ('user', 'assistant') AND "
                f"search_vector @@ {websearch_tsquery_sql(repr('zeppelin'))}"
            )
            plan = " ".join(r[0] for r in cursor.fetchall())
        print("rare word uses chat_msg_search_vector:", "chat_msg_search_vector" in plan)
    finally:
        project.delete()
        users.filter(pk__in=[user.pk, other.pk]).delete()

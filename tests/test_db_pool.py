"""The pool's check before it lends a connection (``config/db/base.py``; issue #16 item 3).

psycopg_pool's own check sent an empty query on every checkout; a turn's database thread checks
out for every call, so that was one round trip per call. The check now probes the socket and
makes the round trip only when the server has closed the connection (a restart, a terminated
backend): a broken connection is still never lent.
"""

import os
import select
import subprocess
import sys
import time
import uuid

import psycopg
import pytest
from django.db import connection

from apps.chat.models import Conversation
from apps.core.db import release_connections
from config.db.base import check_pooled_connection

pytestmark = pytest.mark.django_db(transaction=True)


class CountingConnection(psycopg.Connection):
    """A connection that counts the queries sent through ``execute`` (the pool's check uses it)."""

    sent = 0

    def execute(self, *args, **kwargs):  # type: ignore[override]
        self.sent += 1
        return super().execute(*args, **kwargs)


def _conninfo() -> str:
    s = connection.settings_dict
    return psycopg.conninfo.make_conninfo(
        dbname=s["NAME"],
        user=s["USER"],
        password=s["PASSWORD"] or None,
        host=s["HOST"],
        port=s["PORT"] or None,
    )


def _terminate(pids: list[int]) -> None:
    """Terminate these backends from a connection of their own and wait until they are gone."""
    with psycopg.connect(_conninfo(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids])
        for _ in range(200):
            (left,) = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids]
            ).fetchone()
            if not left:
                return
            time.sleep(0.05)
    raise AssertionError(f"backends {pids} did not end")


def test_lending_a_healthy_idle_connection_sends_no_query():
    conn = CountingConnection.connect(_conninfo(), autocommit=True)
    conn.execute("SELECT 1")
    conn.sent = 0

    check_pooled_connection(conn)

    assert conn.sent == 0
    conn.close()


def test_a_connection_the_server_closed_fails_the_check():
    conn = CountingConnection.connect(_conninfo(), autocommit=True)
    _terminate([conn.info.backend_pid])
    select.select([conn.fileno()], [], [], 10)  # the server's notice and end of file have arrived

    with pytest.raises(psycopg.OperationalError):
        check_pooled_connection(conn)

    conn.close()


def test_after_every_pooled_connection_was_terminated_the_next_query_succeeds():
    pool = connection.pool
    assert pool is not None, "the database pool is not configured"
    Conversation.objects.count()
    release_connections()
    # Several idle connections, as after a busy minute: the pool waits 1 s, 2 s, 4 s, ... after
    # each failed check, so finding them dead one by one would outlast its 10 s timeout.
    held = [pool.getconn() for _ in range(6)]
    for conn in held:
        pool.putconn(conn)
    with psycopg.connect(_conninfo(), autocommit=True) as admin:
        pids = [
            pid
            for (pid,) in admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        ]
    assert pids, "the pool holds no idle connection to terminate"
    _terminate(pids)

    count = Conversation.objects.count()

    assert count == 0


def test_a_turns_server_bound_statements_are_prepared_on_the_pooled_connection_and_no_other():
    from apps.core.db import bound_cursor

    with bound_cursor() as cursor:
        cursor.execute("SELECT count(*) FROM kb.chat_conversations WHERE id = %s", [uuid.uuid4()])
    Conversation.objects.filter(title="client-bound").exists()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE NOT from_sql")
        prepared = [row[0] for row in cursor.fetchall()]

    assert any("FROM kb.chat_conversations WHERE id = $1" in s for s in prepared)
    assert not any("client-bound" in s or "LIMIT 1" in s for s in prepared)


@pytest.mark.parametrize(("pool_max", "threshold"), [("20", "0"), ("0", "None")])
def test_statements_are_prepared_only_with_the_pool(pool_max, threshold):
    """Behind PgBouncer (the pool off: ``KGCHAT_DB_POOL_MAX=0``) a connection may change between
    statements, so nothing is prepared there."""
    env = {**os.environ, "KGCHAT_DB_POOL_MAX": pool_max, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.DATABASES['default']['OPTIONS'].get('prepare_threshold'))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)

    assert out.stdout.strip() == threshold

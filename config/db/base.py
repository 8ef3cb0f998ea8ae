"""PostgreSQL backend that also sees the tables of schema ``kb``, and names the statements it
sent prepared.

kgchat's own tables live in the schema ``kb`` (``db_table = 'kb"."name'``). Django's introspection
only lists tables on the search path, so ``flush`` (used between transactional tests) would skip
them and then fail to truncate ``auth_user``, which they reference. Listing them here under the
same quoted name the models use keeps every Django tool working unchanged.
"""

from __future__ import annotations

import functools
import select
from typing import Any

import psycopg
from django.db.backends.postgresql import base, introspection, operations
from django.db.backends.postgresql.introspection import TableInfo
from psycopg.pq import ConnStatus
from psycopg_pool import ConnectionPool

SCHEMA = "kb"


class DatabaseIntrospection(introspection.DatabaseIntrospection):
    def get_table_list(self, cursor: Any) -> list[TableInfo]:
        tables = super().get_table_list(cursor)
        cursor.execute(
            """
            SELECT c.relname,
                   CASE WHEN c.relispartition THEN 'p' WHEN c.relkind IN ('m', 'v') THEN 'v' ELSE 't' END,
                   obj_description(c.oid, 'pg_class')
            FROM pg_catalog.pg_class c
            JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relkind IN ('f', 'm', 'p', 'r', 'v') AND n.nspname = %s
            """,
            [SCHEMA],
        )
        return tables + [
            TableInfo(f'{SCHEMA}"."{name}', kind, comment) for name, kind, comment in cursor.fetchall()
        ]


def check_pooled_connection(conn: Any, pool: ConnectionPool | None = None) -> None:
    """The pool's check before it lends ``conn``: raise if the connection is broken.

    psycopg_pool's own check (``CONN_HEALTH_CHECKS``) sends an empty query: one round trip per
    checkout, and a turn's database thread checks out for every call. A connection the server
    closed (a restart, ``pg_terminate_backend``, an idle timeout) has its socket readable at once:
    end of file, or the server's FATAL notice. So the round trip is made only then (it raises, and
    the pool replaces the connection); an idle, healthy connection has nothing to read.

    A broken connection means the server probably closed every idle one (a restart): ``pool``'s
    idle connections are then all checked and the broken ones replaced at once. The pool waits
    longer after each failed check (1 s, 2 s, 4 s, ...), so with a dozen dead connections the
    first request after a restart would otherwise give up (``PoolTimeout``).
    """
    if conn.closed or conn.pgconn.status != ConnStatus.OK:
        _sweep(pool)
        raise psycopg.OperationalError("the pooled connection is closed")
    if not _readable(conn.fileno()):
        return
    try:
        ConnectionPool.check_connection(conn)
    except Exception:
        _sweep(pool)
        raise


def _sweep(pool: ConnectionPool | None) -> None:
    if pool is not None:
        pool.check()


def _readable(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


class DatabaseOperations(operations.DatabaseOperations):
    def last_executed_query(self, cursor: Any, sql: Any, params: Any) -> str | None:
        """What the debug log and ``CaptureQueriesContext`` show of a statement: psycopg keeps no
        text for one it ran prepared (``apps/core/db.py``'s, on a pooled connection), so that
        one shows as sent, its placeholders unfilled."""
        return super().last_executed_query(cursor, sql, params) or (str(sql) if sql is not None else None)


class DatabaseWrapper(base.DatabaseWrapper):
    introspection_class = DatabaseIntrospection
    ops_class = DatabaseOperations

    @property
    def pool(self) -> Any:
        pool = super().pool
        # Django gives the pool psycopg_pool's round-trip check when CONN_HEALTH_CHECKS is on.
        if pool is not None and getattr(pool, "_check", None) is ConnectionPool.check_connection:
            pool._check = functools.partial(check_pooled_connection, pool=pool)
        return pool

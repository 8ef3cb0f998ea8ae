"""Database connections under load: giving pooled connections back, and naming an exhausted database.

Django lends each thread its own connection and, with the pool, gives it back only when the
connection is closed, which happens at the end of a request. A chat turn outlives the request
that started it and waits on the model between its queries, so its work runs on
``connection_releasing_executor``, which gives the connection back after every call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar, cast

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.postgresql.base import ServerBindingCursor  # type: ignore[attr-defined]
from django.db.models import Model, QuerySet
from django.db.models.sql import InsertQuery, UpdateQuery

from apps.core.errors import ServiceError

P = ParamSpec("P")
R = TypeVar("R")

# SQLSTATE classes and codes of a server that refuses work for lack of resources:
# 53 insufficient resources (53300 too many connections), 57P03 cannot connect now.
_BUSY_SQLSTATE_PREFIXES = ("53",)
_BUSY_SQLSTATES = {"57P03"}
# A refused connection carries no SQLSTATE in psycopg: the server's words are all there is.
_BUSY_PHRASES = ("too many clients already", "too many connections", "remaining connection slots")


class DatabaseBusy(ServiceError):
    """the database is busy; try again shortly"""

    status = 503
    code = "database_busy"


def is_database_busy(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the database or the pool has no connection to give.

    That is psycopg_pool's ``PoolTimeout`` (every pooled connection lent out for longer than the
    pool's timeout) or a server refusing connections ("too many clients already", starting up).
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ in {"PoolTimeout", "TooManyRequests"} and type(
            current
        ).__module__.startswith("psycopg_pool"):
            return True
        sqlstate = getattr(current, "sqlstate", None)
        if isinstance(sqlstate, str) and (
            sqlstate in _BUSY_SQLSTATES or sqlstate.startswith(_BUSY_SQLSTATE_PREFIXES)
        ):
            return True
        if any(phrase in str(current) for phrase in _BUSY_PHRASES):
            return True
        current = current.__cause__ or current.__context__
    return False


def release_connections() -> None:
    """Give this thread's idle database connections back (to the pool, or close them).

    A connection inside a transaction is left alone: it is released by the call that opened it.
    """
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.in_atomic_block:
            connection.close()


class ConnectionReleasingExecutor(ThreadPoolExecutor):
    """One worker thread that gives its database connection back after every call.

    Used as the ``ThreadSensitiveContext`` executor of a chat turn: the turn's ORM calls keep
    running one at a time on one thread (what Django expects), yet between them, while the model
    streams, the turn holds no connection.
    """

    def __init__(self, name: str = "kgchat-db") -> None:
        super().__init__(max_workers=1, thread_name_prefix=name)

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        def call() -> R:
            try:
                return fn(*args, **kwargs)
            finally:
                release_connections()

        return super().submit(call)


@contextlib.contextmanager
def bound_cursor() -> Iterator[Any]:
    """A cursor of the default database (Django's, with its wrappers) whose parameters travel apart
    from the SQL: psycopg then does not quote each one into the statement's text (about a tenth of
    the CPU of a message's admission, with its ~50 parameters: docs/benchmarks.md).
    For statements Django compiled (``QueryTemplate``, ``rows_write``), which it supports under
    server-side binding; the app's other queries keep Django's default, client-side binding,
    which psycopg never prepares. These are prepared on the connection (psycopg's
    ``prepare_threshold``, set in settings only with the pool: a pooled connection outlives its
    request, and behind a PgBouncer, with the pool off, nothing is prepared), so PostgreSQL plans
    each of them once per connection rather than at every turn."""
    connection = connections[DEFAULT_DB_ALIAS]
    connection.ensure_connection()
    raw = connection.connection
    factory = raw.cursor_factory
    raw.cursor_factory = ServerBindingCursor
    try:
        cursor = connection.cursor()
    finally:
        raw.cursor_factory = factory
    with cursor:
        yield cursor


# The ``INSERT INTO table (columns)`` of each model (without its auto field, for a row that has no
# id yet), from Django's own compiled statement.
_INSERT_HEADS: dict[tuple[type[Model], bool], tuple[list[Any], str]] = {}


def _insert_sql_django(row: Model, fields: list[Any]) -> tuple[str, list[Any]]:
    query = InsertQuery(type(row))
    query.insert_values(fields, [row])
    [(sql, params)] = query.get_compiler(DEFAULT_DB_ALIAS).as_sql()
    return sql, list(params)


def _insert_sql(row: Model) -> tuple[str, list[Any]]:
    """The ``INSERT`` Django would send to save ``row`` (every concrete field, defaults applied).

    Its head (table and columns) is Django's, compiled once per model; the values are prepared as
    Django's insert compiler prepares them (``pre_save``, ``get_db_prep_save``; an expression
    compiled in place), without building a query per row. A row whose auto field is unset leaves
    it to the database's sequence, as ``save()`` does (its id is not read back)."""
    model = type(row)
    auto = model._meta.auto_field
    numbered = auto is not None and getattr(row, auto.attname) is None
    head = _INSERT_HEADS.get((model, numbered))
    if head is None:
        fields = [
            f
            for f in model._meta.local_concrete_fields
            if not getattr(f, "generated", False) and not (numbered and f is auto)
        ]
        sql, params = _insert_sql_django(row, fields)
        if any(hasattr(f, "get_placeholder") for f in fields) or " VALUES (" not in sql:
            return sql, params  # a field with a placeholder of its own: Django's statement each time
        _INSERT_HEADS[(model, numbered)] = (fields, sql[: sql.index(" VALUES (")])
        return sql, params
    fields, text = head
    connection = connections[DEFAULT_DB_ALIAS]
    compiler: Any = None
    placeholders: list[str] = []
    params = []
    for field in fields:
        value = field.pre_save(row, True)
        if hasattr(value, "resolve_expression"):
            if compiler is None:
                compiler = InsertQuery(model).get_compiler(DEFAULT_DB_ALIAS)
            value = value.resolve_expression(compiler.query, allow_joins=False, for_save=True)
            sql, value_params = compiler.compile(value)
            placeholders.append(sql)
            params += value_params
        else:
            placeholders.append("%s")
            params.append(field.get_db_prep_save(value, connection=connection))
    return f"{text} VALUES ({', '.join(placeholders)})", params


def _update_sql(rows: QuerySet[Any], values: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """The ``UPDATE`` ``rows.update(**values)`` would send."""
    query = cast(UpdateQuery, rows.query.chain(UpdateQuery))
    query.add_update_values(dict(values))
    query.annotations = {}
    sql, params = query.get_compiler(DEFAULT_DB_ALIAS).as_sql()
    return sql, list(params)


def _inserts_grouped(statements: list[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
    """Consecutive ``INSERT``s into the same columns as one, with a ``VALUES`` list."""
    grouped: list[tuple[str, list[Any]]] = []
    last: str | None = None  # the head of the last statement, when it has a VALUES list
    for sql, params in statements:
        head, found, values = sql.partition(" VALUES ")
        if found and head == last:
            previous, previous_params = grouped[-1]
            grouped[-1] = (f"{previous}, {values}", previous_params + params)
            continue
        grouped.append((sql, list(params)))
        last = head if found else None
    return grouped


def rows_write(
    *,
    inserts: Sequence[Model] = (),
    updates: Sequence[tuple[QuerySet[Any], Mapping[str, Any]]] = (),
    reads: Sequence[QuerySet[Any] | tuple[str, Sequence[Any]] | None] = (),
) -> list[Any]:
    """Insert ``inserts``, apply ``updates`` (``queryset.update(**values)``) and read ``reads``
    (one-value queries, or their SQL and parameters; None reads None), all in one statement: one
    round trip, atomic without a transaction of its own.

    The reads and the updates' conditions see the database as it was before the statement (not
    the rows it inserts); a parent row may come with its children (foreign keys are checked at the
    end of the statement); no two updates may touch the same row. Rows of one model in a row go in
    one ``INSERT`` (an id the database numbers follows their order). The inserted rows are marked
    saved, as ``save()`` would."""
    parts: list[str] = []
    params: list[Any] = []
    statements = _inserts_grouped([_insert_sql(row) for row in inserts]) + [
        _update_sql(rows, values) for rows, values in updates
    ]
    for n, (sql, statement_params) in enumerate(statements):
        parts.append(f"w{n} AS ({sql})")
        params += statement_params
    columns: list[str] = []
    for read in reads:
        if read is None:
            columns.append("NULL")
            continue
        sql, read_params = read if isinstance(read, tuple) else read.query.sql_with_params()
        columns.append(f"({sql})")
        params += read_params
    select = f"SELECT {', '.join(columns) or 'NULL'}"
    with bound_cursor() as cursor:
        cursor.execute(f"WITH {', '.join(parts)} {select}" if parts else select, params)
        values = cursor.fetchone()
    for row in inserts:
        row._state.adding = False
        row._state.db = DEFAULT_DB_ALIAS
    return list(values)

"""Querysets built and compiled once, then run with new values: Django's query building, most of
an admission's CPU (filters, joins, compiling: ~5 ms of the ~9 ms a message cost), is paid once
per process and query shape instead of once per message.

``QueryTemplate(build)`` keeps ``build`` (a function of keyword values returning a queryset) as
the one place the query is written. The first call of a shape builds it twice with stand-in
values (random UUIDs, integers, datetimes, strings of the values' types), compiles both, and
keeps the SQL once it has checked that every value is one plain parameter of the statement: the
two builds give the same SQL, the same parameters but for the stand-ins, each stand-in at the
same places, and no stand-in anywhere else (in the SQL text, inside another parameter). Later
calls put the real values at those places and send the kept SQL. A build that fails a check (a
value transformed, say ``name__icontains``, or the builder reading the clock or a setting of its
own) is never kept: that shape runs ``build`` every time, as before.

Values of another type (None, booleans, enums...), and those named ``fixed`` (a ``LIMIT``, which
Django writes into the SQL), are no parameters: they are part of the shape, passed to ``build`` as
they are and keyed on. So is ``shape``, for what the builder reads from elsewhere that changes the
SQL (a setting): the caller names it.
"""

from __future__ import annotations

import copy
import random
import threading
import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators  # type: ignore[attr-defined]
from django.db.models.sql.compiler import SQLCompiler

from apps.core.db import bound_cursor

M = TypeVar("M", bound=Model)

# The types a value may have to be a parameter: a stand-in of each is made by its maker.
_STAND_INS: dict[type, Callable[[], Any]] = {
    uuid.UUID: uuid.uuid4,
    int: lambda: random.randrange(2**52, 2**62),
    datetime: lambda: datetime(2999, 1, 1, tzinfo=UTC) + timedelta(microseconds=random.randrange(2**40)),
    str: lambda: f"stand-in-{uuid.uuid4().hex}",
}


def _parameter_type(value: object) -> type | None:
    kind = type(value)
    return kind if kind in _STAND_INS else None  # bool is not int here: type(), not isinstance()


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple[Any, ...]
    places: tuple[tuple[int, str], ...]  # (parameter index, value name)
    compiler: SQLCompiler
    converters: dict[int, Any]  # the columns' converters (``SQLCompiler.get_converters``)


class QueryTemplate(Generic[M]):
    """A queryset ``build(**values)``, compiled once per shape and run with new values."""

    def __init__(
        self, build: Callable[..., QuerySet[M, Any]], *, first: bool = False, fixed: Sequence[str] = ()
    ) -> None:
        """``first``: the template reads what ``build(...).first()`` reads (its order, one row);
        ``fixed``: the values that are never parameters (keyed on, whatever their type)."""
        self._build = build
        self._first = first
        self._fixed = frozenset(fixed)
        self._compiled: dict[Hashable, _Compiled | None] = {}
        self._lock = threading.Lock()

    def _queryset(self, values: dict[str, Any]) -> QuerySet[M, Any]:
        queryset = self._build(**values)
        if self._first:
            queryset = (queryset if queryset.ordered else queryset.order_by("pk"))[:1]
        return queryset

    def _parameter_type(self, name: str, value: object) -> type | None:
        return None if name in self._fixed else _parameter_type(value)

    def _key(self, shape: Hashable, values: dict[str, Any]) -> Hashable:
        return (
            shape,
            tuple(
                (name, kind) if (kind := self._parameter_type(name, value)) else (name, None, value)
                for name, value in sorted(values.items())
            ),
        )

    def _compile(self, values: dict[str, Any]) -> _Compiled | None:
        """Build twice with stand-ins; the kept SQL, or None when a value is no plain parameter."""
        names = [name for name, value in values.items() if self._parameter_type(name, value)]
        builds = []
        for _ in range(2):
            stand_ins = {name: _STAND_INS[type(values[name])]() for name in names}
            compiler = self._queryset(values | stand_ins).query.get_compiler(DEFAULT_DB_ALIAS)
            sql, params = compiler.as_sql()
            builds.append((stand_ins, compiler, sql, tuple(params)))
        (ins_a, compiler, sql_a, params_a), (ins_b, _, sql_b, params_b) = builds
        if sql_a != sql_b or len(params_a) != len(params_b):
            return None
        by_value = {(type(v), v): name for name, v in ins_a.items()}
        texts = [t for v in ins_a.values() for t in {str(v), getattr(v, "hex", str(v))}]
        places: list[tuple[int, str]] = []
        for index, (a, b) in enumerate(zip(params_a, params_b, strict=True)):
            name = by_value.get((type(a), a))
            if name is not None:
                if not (type(b) is type(ins_b[name]) and b == ins_b[name]):
                    return None
                places.append((index, name))
            elif a != b or any(t in str(a) for t in texts):
                return None
        if {name for _, name in places} != set(names) or any(t in sql_a for t in texts):
            return None
        fields = [s[0] for s in compiler.select[: compiler.col_count]]
        if compiler.has_composite_fields(fields):
            return None
        return _Compiled(sql_a, params_a, tuple(places), compiler, compiler.get_converters(fields))

    def _get(self, shape: Hashable, values: dict[str, Any]) -> _Compiled | None:
        key = self._key(shape, values)
        try:
            return self._compiled[key]
        except KeyError:
            pass
        compiled = self._compile(values)
        with self._lock:
            self._compiled[key] = compiled
        return compiled

    def sql_with_params(self, *, shape: Hashable = (), **values: Any) -> tuple[str, list[Any]]:
        """The statement and its parameters for ``values`` (a read for ``rows_write``)."""
        compiled = self._get(shape, values)
        if compiled is None:
            sql, built = self._queryset(values).query.sql_with_params()
            return sql, list(built)
        params = list(compiled.params)
        for index, name in compiled.places:
            params[index] = values[name]
        return compiled.sql, params

    def rows(self, *, shape: Hashable = (), **values: Any) -> list[M]:
        """The model instances the queryset reads for ``values`` (related ones and annotations set)."""
        compiled = self._get(shape, values)
        if compiled is None:
            return list(self._queryset(values))
        sql, params = self.sql_with_params(shape=shape, **values)
        with bound_cursor() as cursor:
            cursor.execute(sql, params)
            fetched = cursor.fetchall()
        return _instances(compiled, connections[DEFAULT_DB_ALIAS], fetched)

    def first(self, *, shape: Hashable = (), **values: Any) -> M | None:
        rows = self.rows(shape=shape, **values)
        return rows[0] if rows else None


def _instances(compiled: _Compiled, connection: Any, fetched: Sequence[Any]) -> list[Any]:
    """Model instances of fetched rows, as Django's ``ModelIterable`` makes them."""
    compiler = copy.copy(compiled.compiler)
    compiler.connection = connection  # this thread's, for the converters
    select, klass_info, annotation_col_map = compiler.select, compiler.klass_info, compiler.annotation_col_map
    assert klass_info is not None
    model_cls = klass_info["model"]
    select_fields = klass_info["select_fields"]
    start, end = select_fields[0], select_fields[-1] + 1
    init_list = [f[0].target.attname for f in select[start:end]]
    populators = get_related_populators(klass_info, select, DEFAULT_DB_ALIAS)
    out = []
    rows = compiler.apply_converters(fetched, compiled.converters) if compiled.converters else fetched
    for row in rows:
        obj = model_cls.from_db(DEFAULT_DB_ALIAS, init_list, row[start:end])
        for populator in populators:
            populator.populate(row, obj)
        for attr_name, col_pos in (annotation_col_map or {}).items():
            setattr(obj, attr_name, row[col_pos])
        out.append(obj)
    return out

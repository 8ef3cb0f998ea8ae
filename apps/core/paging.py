"""The one pager of every list route: ``{"items", "count"}`` from ``limit``/``offset``.

``limit`` and ``offset`` arrive checked (``ListLimit``, ``ListOffset``: 0 to a billion); a limit
above the list's page size is lowered to it, an offset past the end gives an empty page, and
``count`` is the size of the whole list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.db.models import QuerySet

T = TypeVar("T")

# A list's page size when its route names none.
PAGE_SIZE = 500


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    count: int


def page_of(
    rows: QuerySet[Any, T] | Sequence[T], *, limit: int, offset: int, size: int = PAGE_SIZE
) -> Page[T]:
    """The page of ``rows`` at ``offset``: at most ``limit`` items, and never more than ``size``."""
    taken = max(0, min(limit, size))
    start = max(0, offset)
    items = list(rows[start : start + taken])
    count = rows.count() if isinstance(rows, QuerySet) else len(rows)
    return Page(items=items, count=count)

"""A real redis-server on a free loopback port, for the tests that need one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from bench.support import redis_server as _redis_server


@contextmanager
def redis_server() -> Iterator[str]:
    """Start redis-server on 127.0.0.1 with no persistence; yield its URL; stop it."""
    with _redis_server() as (url, _pid):
        yield url

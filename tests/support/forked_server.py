"""Helpers for ASGI servers forked from the test process (browser and multi-process tests)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor


def reset_thread_executors_after_fork() -> None:
    """Give a forked child fresh asgiref executors.

    ``sync_to_async`` runs thread-sensitive work on a class-level single-thread executor. When the
    test process used it before forking, the child inherits an executor that believes its worker
    thread exists although threads do not survive ``fork``: every database call of a consumer
    (session lookup, ORM) would wait forever. A new executor, and no stale per-context ones, fix it.
    """
    from asgiref.sync import AsyncToSync, SyncToAsync

    SyncToAsync.single_thread_executor = ThreadPoolExecutor(max_workers=1)
    SyncToAsync.context_to_thread_executor.clear()
    AsyncToSync.context_to_thread_executor.clear()


def close_database_pools() -> None:
    """Close this process's database connection pools before forking a server.

    A forked child would otherwise inherit the pool's open sockets and its worker threads' state
    (the threads themselves do not survive ``fork``), sharing connections with the parent. Each
    process opens its own pool again on first use.
    """
    from django.db import connections

    for connection in connections.all():
        connection.close()
        close_pool = getattr(connection, "close_pool", None)
        if close_pool is not None:
            close_pool()

"""Test setup: the embedded PostgreSQL is started if no DATABASE_URL is given (never SQLite)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# Packages whose tests share package- or session-scoped servers (one `make run`; one chromium and
# live server): each runs whole on one worker.
_ONE_WORKER_PACKAGES = {TESTS / "blackbox": "blackbox", TESTS / "chat" / "browser": "browser"}


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("DATABASE_URL"):
        from config import embedded_db

        embedded_db.start()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """With pytest-xdist (``make test`` runs one worker per core, ``--dist loadgroup``), a module's
    tests run on one worker, so its module-scoped servers start once, and the packages above run
    whole on one worker."""
    for item in items:
        path = Path(str(item.fspath)).resolve()
        group = next((g for p, g in _ONE_WORKER_PACKAGES.items() if p in path.parents), None)
        item.add_marker(pytest.mark.xdist_group(group or str(path.relative_to(TESTS))))


@pytest.fixture(autouse=True)
async def _close_connections_of_async_threads():
    """Close the connections Django opened in sync_to_async's thread, so test databases can be dropped."""
    yield
    from asgiref.sync import sync_to_async
    from django.db import connections

    await sync_to_async(connections.close_all)()

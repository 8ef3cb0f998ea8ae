"""Test setup: the embedded PostgreSQL is started if no DATABASE_URL is given (never SQLite)."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("DATABASE_URL"):
        from config import embedded_db

        embedded_db.start()


@pytest.fixture(autouse=True)
async def _close_connections_of_async_threads():
    """Close the connections Django opened in sync_to_async's thread, so test databases can be dropped."""
    yield
    from asgiref.sync import sync_to_async
    from django.db import connections

    await sync_to_async(connections.close_all)()

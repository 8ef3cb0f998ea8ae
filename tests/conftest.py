"""Test setup: the embedded PostgreSQL is started if no DATABASE_URL is given (never SQLite)."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("DATABASE_URL"):
        from config import embedded_db

        embedded_db.start()

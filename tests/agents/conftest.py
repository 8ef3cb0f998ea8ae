"""Close the database connections Django's async ORM opened in its worker thread after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from asgiref.sync import sync_to_async
from django.db import connections


@pytest.fixture(autouse=True)
async def _close_async_orm_connections() -> AsyncIterator[None]:
    yield
    await sync_to_async(connections.close_all)()

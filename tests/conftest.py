"""Test setup: the embedded PostgreSQL is started if no DATABASE_URL is given (never SQLite)."""

from __future__ import annotations

import os
from typing import Any

import pytest

# Packages whose tests share package- or session-scoped servers (one `make run`; one chromium and
# live server): each runs whole on one worker.
_ONE_WORKER_PACKAGES = {"tests/blackbox/": "blackbox", "tests/chat/browser/": "browser"}


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("DATABASE_URL"):
        from apps.core import embedded_db

        embedded_db.start()


@pytest.hookimpl(optionalhook=True)  # xdist may be switched off (-p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With pytest-xdist (``make test`` runs one worker per core), each test module runs whole on one
    worker, so its module-scoped servers and checks start once, and the packages above run whole on
    one worker. A scheduler of our own: xdist's ``--dist loadgroup`` reads its groups from test ids
    that pytest 9 no longer lets it change (measured: every test was its own unit)."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ModuleScheduling(config, log)


def work_unit(nodeid: str) -> str:
    """The unit of work a test goes to a worker with: its module, or one of the packages above."""
    path = nodeid.split("::", 1)[0]
    return next((unit for prefix, unit in _ONE_WORKER_PACKAGES.items() if path.startswith(prefix)), path)


@pytest.fixture(autouse=True)
async def _close_connections_of_async_threads():
    """Close the connections Django opened in sync_to_async's thread, so test databases can be dropped."""
    yield
    from asgiref.sync import sync_to_async
    from django.db import connections

    await sync_to_async(connections.close_all)()


@pytest.fixture
def scripted(settings):
    """Register a scripted provider and force every model onto it; yields the provider."""
    import uuid

    from apps.agents.llm.scripted import ScriptedProvider, register_script, unregister_script

    name = f"test-{uuid.uuid4().hex[:8]}"
    provider = ScriptedProvider()
    register_script(name, provider)
    settings.KGCHAT_MODEL = f"scripted/{name}"
    yield provider
    unregister_script(name)

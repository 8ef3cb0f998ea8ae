"""A daphne process serving kgchat (its /mcp among the rest) on this test run's database."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.db import connection

from bench.support import start_daphne, wait_ready


def child_env() -> dict[str, str]:
    """Environment for a server process that must use this test run's database."""
    db = connection.settings_dict
    url = f"postgresql://{db['USER']}@{quote(db['HOST'] or '', safe='')}/{db['NAME']}"
    if db.get("PORT"):
        url = f"postgresql://{db['USER']}@{quote(db['HOST'], safe='')}:{db['PORT']}/{db['NAME']}"
    return {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings.test"}


@contextmanager
def mcp_daphne(django_db_blocker: Any, **env: str) -> Iterator[str]:
    """The URL of /mcp on a daphne started with ``env`` added to ``child_env()``, stopped after."""
    with django_db_blocker.unblock():
        child = {**child_env(), **env}
    with tempfile.TemporaryDirectory() as logdir:
        server = start_daphne("daphne", env=child, log=Path(logdir) / "daphne.log")
        try:
            wait_ready(server, timeout=60)
            yield f"{server.http}/mcp"
        finally:
            server.stop(10)

"""The ASGI application as daphne serves it (`make run`): pages, their static files, the API."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from config.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


async def get(path: str) -> dict[str, Any]:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.get(path)
    return {"status": response.status_code, "body": response.content}


async def test_the_app_serves_its_own_static_files():
    response = await get("/static/chat/chat.js")

    assert response["status"] == 200
    assert b"WebSocket" in response["body"]


async def test_pages_and_api_docs_are_served():
    login = await get("/accounts/login/")
    docs = await get("/api/docs")
    root = await get("/")

    assert login["status"] == 200 and b"<form" in login["body"]
    assert docs["status"] == 200
    assert root["status"] == 302


async def test_an_unknown_page_is_a_plain_404_without_a_traceback():
    response = await get("/no/such/page/")

    assert response["status"] == 404
    assert b"Traceback" not in response["body"]


def test_the_served_process_keeps_its_startup_heap_out_of_the_collectors_reach():
    """A full collection stops the whole process while it walks every tracked object: importing the
    application freezes what the imports made (~280,000 objects), so one walks only what turns
    made since (docs/benchmarks.md: 220-290 ms pauses under load, then 30-75 ms)."""
    code = "import gc, config.asgi; print(gc.isenabled(), gc.get_freeze_count(), len(gc.get_objects()))"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )

    enabled, frozen, tracked = done.stdout.split()[-3:]
    assert int(frozen) > 100_000 and int(tracked) < 1_000, done.stdout
    assert enabled == "True", "the collector is off while the application is imported, then on again"

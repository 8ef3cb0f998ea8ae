"""The ASGI application as daphne serves it (`make run`): pages, their static files, the API."""

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

"""Django's middlewares under ASGI as kgchat serves them (config/middleware.py): the hooks that do
no I/O run on the event loop, and what must reach the database (a session that changed, messages
to keep for the next page) still does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import django.utils.deprecation
import httpx
import pytest
from asgiref.sync import sync_to_async

import config.middleware
from config.asgi import application
from tests.factories import add_member, make_project, make_token, make_user

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-for-tests-1"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        yield http


@pytest.fixture
def hops(monkeypatch) -> list[str]:
    """The middleware hooks that went to a thread (Django's ``MiddlewareMixin`` or ours)."""
    sent: list[str] = []

    def spy(fn: Any, **kwargs: Any) -> Any:
        owner = getattr(fn, "__self__", None)
        if owner is not None and type(owner).__name__.endswith("Middleware"):
            sent.append(f"{type(owner).__name__}.{fn.__name__}")
        return sync_to_async(fn, **kwargs)

    monkeypatch.setattr(config.middleware, "sync_to_async", spy)
    monkeypatch.setattr(django.utils.deprecation, "sync_to_async", spy)
    return sent


# Django's, by name for `check --deploy`: their hooks still go to the thread (settings/base.py).
DJANGOS_OWN = ("SecurityMiddleware", "CsrfViewMiddleware", "XFrameOptionsMiddleware")


async def _login(client: httpx.AsyncClient, username: str) -> httpx.Response:
    await client.get("/accounts/login/")
    return await client.post(
        "/accounts/login/",
        data={
            "username": username,
            "password": PASSWORD,
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
        },
    )


async def test_an_api_request_that_changes_no_session_runs_every_hook_on_the_event_loop(client, hops):
    user = await sync_to_async(make_user)()
    project = await sync_to_async(make_project)(user)
    token = await sync_to_async(make_token)(user, project)

    response = await client.get("/api/projects", headers={"Authorization": f"Bearer {token}"})

    assert response.status_code == 200
    assert project.name in response.text
    assert response.headers["X-Frame-Options"] == "DENY"  # Django's own middlewares still ran
    assert [hop for hop in hops if not hop.startswith(DJANGOS_OWN)] == []


async def test_a_login_saves_its_session_on_the_thread_and_the_next_page_knows_the_user(client, hops):
    await sync_to_async(make_user)("alice")

    login = await _login(client, "alice")
    page = await client.get("/chat/")

    assert login.status_code == 302 and client.cookies.get("sessionid")
    assert "SessionMiddleware.process_response" in hops
    assert page.status_code == 200 and "alice" in page.text


async def test_a_message_a_view_adds_before_redirecting_is_kept_for_the_next_page(client, hops):
    admin = await sync_to_async(make_user)("root")
    admin.is_staff = admin.is_superuser = True
    await sync_to_async(admin.save)()
    member = await sync_to_async(make_user)("member")
    project = await sync_to_async(make_project)()
    await sync_to_async(add_member)(project, member, "viewer")
    await _login(client, "root")
    await client.get("/admin/projects/apitoken/add/")

    created = await client.post(
        "/admin/projects/apitoken/add/",
        data={
            "user": member.pk,
            "project": project.pk,
            "name": "ci",
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
        },
    )
    shown = await client.get(created.headers["location"])

    assert created.status_code == 302
    assert "MessageMiddleware.process_response" in hops
    assert "copy it now" in shown.text

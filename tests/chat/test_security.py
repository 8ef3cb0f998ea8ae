"""Abuse and deployment checks (issue 7): websocket origins, CSRF, ``check --deploy``, no secrets in logs.

(An anonymous websocket closed with 4401 is tested in ``test_agent_chat``.)
"""

import json
import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

from apps.chat.models import Conversation, Message
from apps.projects.models import Project
from config.asgi import application
from tests.chat.conftest import adb, session_cookie
from tests.factories import make_token, make_user

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct-horse-battery-staple-1"


# --- websocket origin ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "origin",
    [b"http://evil.example", b"http://127.0.0.1.evil.example", b"null", None],
    ids=["foreign", "lookalike", "null", "missing"],
)
async def test_websocket_from_a_foreign_origin_is_refused_even_with_a_session(origin):
    user = await adb(make_user)("mallory-victim")
    session = await adb(session_cookie)(user)
    headers = [(b"cookie", f"sessionid={session}".encode())]
    if origin is not None:
        headers.append((b"origin", origin))
    communicator = WebsocketCommunicator(application, "/ws/chat/", headers=headers)

    connected, _ = await communicator.connect()

    assert not connected


@pytest.mark.django_db(transaction=True)
async def test_websocket_from_an_allowed_origin_is_accepted():
    user = await adb(make_user)("alice")
    session = await adb(session_cookie)(user)
    communicator = WebsocketCommunicator(
        application,
        "/ws/chat/",
        headers=[(b"origin", b"http://localhost:8000"), (b"cookie", f"sessionid={session}".encode())],
    )

    connected, _ = await communicator.connect()

    assert connected
    await communicator.disconnect()


# --- CSRF --------------------------------------------------------------------------------------


def csrf_client(user=None) -> Client:
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    return client


def csrf_token_of(client: Client) -> str:
    client.get("/accounts/login/")
    return client.cookies["csrftoken"].value


@pytest.mark.django_db
def test_login_form_needs_its_csrf_token():
    make_user("dora", password=PASSWORD)
    client = csrf_client()
    credentials = {"username": "dora", "password": PASSWORD}

    forged = client.post("/accounts/login/", credentials)
    token = csrf_token_of(client)
    genuine = client.post("/accounts/login/", {**credentials, "csrfmiddlewaretoken": token})

    assert forged.status_code == 403
    assert genuine.status_code == 302 and genuine["Location"] == "/chat/"


@pytest.mark.django_db
def test_logout_form_needs_its_csrf_token():
    client = csrf_client(make_user("erin"))
    page = client.get("/chat/")

    forged = client.post("/accounts/logout/")
    still_in = client.get("/chat/")
    genuine = client.post("/accounts/logout/", {"csrfmiddlewaretoken": page.context["csrf_token"]})

    assert forged.status_code == 403 and still_in.status_code == 200
    assert genuine.status_code == 302 and client.get("/chat/").status_code == 302


@pytest.mark.django_db
def test_session_authenticated_api_posts_need_the_csrf_token():
    user = make_user("frank")
    client = csrf_client(user)

    forged = client.post("/api/projects", {"name": "Forged"}, content_type="application/json")
    token = csrf_token_of(client)
    genuine = client.post(
        "/api/projects", {"name": "Genuine"}, content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    reading = client.get("/api/projects")

    assert forged.status_code == 401 and forged.json()["code"] == "unauthorized"
    assert genuine.status_code == 201
    assert list(Project.objects.values_list("name", flat=True)) == ["Genuine"]
    assert reading.status_code == 200


@pytest.mark.django_db
def test_a_forged_chat_post_starts_no_turn_and_cancels_nothing():
    user = make_user("gina")
    client = csrf_client(user)
    token = csrf_token_of(client)
    project = client.post(
        "/api/projects", {"name": "Mine"}, content_type="application/json", HTTP_X_CSRFTOKEN=token
    ).json()
    conversation = Conversation.objects.create(project_id=project["id"], user=user)

    stream = client.post(
        "/api/chat/stream", {"message": "hi", "projectId": project["id"]}, content_type="application/json"
    )
    cancel = client.post(f"/api/chat/conversations/{conversation.id}/cancel")

    assert stream.status_code == 401 and cancel.status_code == 401
    assert not Message.objects.exists()
    assert Conversation.objects.count() == 1


@pytest.mark.django_db
def test_bearer_tokens_need_no_csrf_token():
    user = make_user("hank")
    secret = make_token(user)
    client = Client(enforce_csrf_checks=True)

    created = client.post(
        "/api/projects",
        {"name": "By token"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )

    assert created.status_code == 201


# --- production settings -----------------------------------------------------------------------


def test_check_deploy_is_clean_with_production_settings():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "kgchat.example.com",
        "DATABASE_URL": "postgresql://kgchat:secret@db:5432/kgchat",
        "REDIS_URL": "redis://redis:6379/0",
    }

    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_production_settings_refuse_to_start_without_a_secret_key():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.production"}
    env.pop("DJANGO_SECRET_KEY", None)

    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode != 0 and "DJANGO_SECRET_KEY" in result.stderr


# --- secrets never logged ----------------------------------------------------------------------


@pytest.fixture
def all_logs(caplog):
    """Every record of every logger, at DEBUG."""
    caplog.set_level(logging.DEBUG)
    return caplog


def logged_text(caplog) -> str:
    parts = [caplog.text]
    for record in caplog.records:
        parts.append(record.getMessage())
        parts.append(json.dumps({k: str(v) for k, v in vars(record).items()}))
    return "\n".join(parts)


@pytest.mark.django_db
def test_api_tokens_and_passwords_never_appear_in_logs(all_logs, monkeypatch):
    user = make_user("ivan", password=PASSWORD)
    secret = make_token(user)
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    wrong = "x" + secret[1:]
    client = Client()

    ok = client.get("/api/projects", **bearer)
    refused = client.get("/api/projects", HTTP_AUTHORIZATION=f"Bearer {wrong}")
    failed_login = client.post("/accounts/login/", {"username": "ivan", "password": PASSWORD + "!"})
    login = client.post("/accounts/login/", {"username": "ivan", "password": PASSWORD})

    def crash(**kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr("apps.projects.selectors.project_list_with_roles", crash)
    crashed = client.get("/api/projects", **bearer)

    assert (ok.status_code, refused.status_code, failed_login.status_code, login.status_code) == (
        200,
        401,
        200,
        302,
    )
    assert crashed.status_code == 500 and crashed.json()["code"] == "internal_error"
    logs = logged_text(all_logs)
    assert "the database went away" in logs  # the failure itself is logged
    for leaked in (secret, wrong, PASSWORD):
        assert leaked not in logs
        assert leaked not in crashed.content.decode()

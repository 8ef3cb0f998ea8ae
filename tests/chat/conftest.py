"""Shared fixtures and helpers of the chat tests: a scripted model, a small graph with its default agent,
the OpenAI-compatible test server, SSE and websocket turns."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient, Client

from apps.agents.definitions import default_agents_install
from apps.agents.models import AgentDefinition
from apps.chat.streams.bus import InProcessFrameBus, set_bus
from apps.chat.turns.service import turn_wait_all
from config.asgi import application
from tests.factories import make_entity, make_project, make_relationship, make_user
from tests.llm_server import LLMTestServer


@pytest.fixture(autouse=True)
def fresh_bus():
    set_bus(InProcessFrameBus())
    yield
    set_bus(None)


@pytest.fixture
def world(db):
    """A user, their project with a tiny graph, and a logged-in async client."""
    user = make_user("carol")
    project = make_project(owner=user, name="World")
    paris = make_entity(project, "paris", type="City", name="Paris", description="Capital city of France")
    france = make_entity(project, "france", type="Country", name="France", description="A country in Europe")
    make_relationship(project, paris, "CAPITAL_OF", france)
    client = AsyncClient()
    client.force_login(user)
    return {"user": user, "project": project, "paris": paris, "france": france, "client": client}


@pytest.fixture
def agent(world):
    """The world project's default agent (``graph-query-agent``)."""
    default_agents_install(project=world["project"])
    return AgentDefinition.objects.get(project=world["project"], name="graph-query-agent")


@pytest.fixture(scope="module")
def llm():
    """The OpenAI-compatible test server on loopback, one per test module."""
    with LLMTestServer() as server:
        yield server


def agent_request(world, agent, message="Where is Paris?") -> dict[str, Any]:
    """The body of a first message to ``agent`` in the world project."""
    return {"message": message, "projectId": str(world["project"].id), "agentDefinitionId": str(agent.id)}


def parse_sse(raw: bytes) -> list[dict[str, Any]]:
    frames = []
    for block in raw.decode().split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                frames.append(json.loads(line[len("data: ") :]))
    return frames


async def sse_turn(
    client: AsyncClient, body: dict[str, Any]
) -> tuple[int, list[dict[str, Any]] | dict[str, Any]]:
    """POST /api/chat/stream; return (status, frames) or (status, json error)."""
    response = await client.post("/api/chat/stream", body, content_type="application/json")
    if response.status_code != 200:
        return response.status_code, json.loads(response.content)
    chunks = [chunk async for chunk in response.streaming_content]
    await turn_wait_all()
    return 200, parse_sse(b"".join(chunks))


def tokens(frames: list[dict[str, Any]]) -> str:
    return "".join(f["token"] for f in frames if f["type"] == "token")


def types(frames: list[dict[str, Any]]) -> list[str]:
    return [f["type"] for f in frames]


adb = sync_to_async


def session_cookie(user) -> str:
    """A logged-in session id for ``user`` (the websocket authenticates by the session cookie)."""
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def ws_connect(user) -> WebsocketCommunicator:
    """A connected websocket of ``user``."""
    communicator = WebsocketCommunicator(application, "/ws/chat/", headers=[(b"origin", b"http://127.0.0.1")])
    session = await sync_to_async(session_cookie)(user)
    communicator.scope["headers"].append((b"cookie", f"sessionid={session}".encode()))
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def ws_turn(communicator, payload, *, wait=30) -> list[dict[str, Any]]:
    """Send ``payload``; the frames up to ``done`` (or a refusal, an ``error`` without ``seq``)."""
    await communicator.send_json_to(payload)
    frames = []
    while True:
        frame = await communicator.receive_json_from(timeout=wait)
        frames.append(frame)
        if frame["type"] == "done" or (frame["type"] == "error" and "seq" not in frame):
            return frames

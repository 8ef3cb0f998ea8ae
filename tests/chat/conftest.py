"""Shared helpers for chat tests: a scripted model selected by name, a small graph, stream readers."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from apps.agents.llm.scripted import ScriptedProvider, register_script, unregister_script
from apps.chat.bus import InProcessFrameBus, set_bus
from apps.chat.services import turn_wait_all
from tests.factories import make_entity, make_project, make_relationship, make_user


@pytest.fixture
def scripted(settings):
    """Register a scripted provider and force every model onto it; yields the provider."""
    name = f"test-{uuid.uuid4().hex[:8]}"
    provider = ScriptedProvider()
    register_script(name, provider)
    settings.KGCHAT_MODEL = f"scripted/{name}"
    yield provider
    unregister_script(name)


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

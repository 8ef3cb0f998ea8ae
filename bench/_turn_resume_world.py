"""The world ``bench.turn_resume`` kills turns in: a user and a project whose agent has no tools, the
model server that holds an answer mid-stream until released, the servers' environment, and the
client's steps (an SSE turn until the model holds, the turn's saved mark, the first frame after a
restart)."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.parse
from typing import Any


def _database_url() -> str:
    from django.db import connection

    s = connection.settings_dict
    host = urllib.parse.quote(s["HOST"] or "", safe="")
    password = f":{urllib.parse.quote(s['PASSWORD'], safe='')}" if s["PASSWORD"] else ""
    port = f":{s['PORT']}" if s["PORT"] else ""
    return f"postgresql://{s['USER']}{password}@{host}{port}/{s['NAME']}"


class LLMServerHolding:
    """``tests.llm_server`` answering ``words`` words; after ``hold``, its next answer stops after
    5 of them until ``release``."""

    def __init__(self, words: int) -> None:
        from tests.llm_server import LLMTestServer

        self.words = [f"w{i} " for i in range(words)]
        self.gate = threading.Event()
        self.held_next = False
        self.server = LLMTestServer(responder=self._answer)

    def __enter__(self) -> LLMServerHolding:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate.set()
        self.server.__exit__(*exc)

    @property
    def base_url(self) -> str:
        return str(self.server.base_url)

    def hold(self) -> None:
        self.gate, self.held_next = threading.Event(), True

    def release(self) -> None:
        self.gate.set()

    def _answer(self, request: dict[str, Any]) -> Any:
        from tests.llm_server import Stream, text_chunks

        if self.held_next:
            self.held_next = False
            return Stream(text_chunks(*self.words), gate=self.gate, gate_after=5, gate_timeout=60)
        return Stream(text_chunks(*self.words))


def resume_world(lease: int) -> dict[str, Any]:
    """A user (with an API token and a session) and a project whose agent has no tools."""
    from django.test import Client

    from apps.agents.definitions import default_agents_install
    from apps.agents.models import AgentDefinition
    from tests.factories import make_project, make_token, make_user

    user = make_user(f"bench-resume-{lease}-{time.monotonic_ns()}")
    project = make_project(owner=user, name=f"bench resume {time.monotonic_ns()}")
    default_agents_install(project=project)
    agent = AgentDefinition.objects.get(project=project, name="graph-query-agent")
    agent.tools = []
    agent.save()
    browser = Client()
    browser.force_login(user)
    return {
        "user": user,
        "project": project,
        "agent": agent,
        "token": make_token(user),
        "session": browser.cookies["sessionid"].value,
    }


def server_env(model_url: str, lease: int) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": _database_url(),
        "KGCHAT_MODEL": "openai/test",
        "OPENAI_BASE_URL": model_url,
        "OPENAI_API_KEY": "bench-key",
        "KGCHAT_TURN_LEASE_SECONDS": str(lease),
    }


def streamed_until_held(http: Any, server: Any, setup: dict[str, Any]) -> list[dict[str, Any]]:
    """Start an agent turn on ``server`` over SSE; its frames until the model holds (4 words)."""
    body = {
        "message": "hi",
        "projectId": str(setup["project"].id),
        "agentDefinitionId": str(setup["agent"].id),
    }
    headers = {"Authorization": f"Bearer {setup['token']}"}
    seen: list[dict[str, Any]] = []
    with http.stream("POST", f"{server.http}/api/chat/stream", json=body, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"the turn was refused: {response.status_code}\n{server.tail(40)}")
        for line in response.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
            if "".join(f.get("token", "") for f in seen).count(" ") == 4:  # its first chunk: no text
                return seen
    raise RuntimeError(f"the turn ended before its model held:\n{server.tail(40)}")


def until_mark(conversation_id: str, seq: int) -> None:
    """Wait until the turn's saved mark counts its frames up to ``seq`` (its text paused)."""
    from apps.chat.models import Conversation

    deadline = time.monotonic() + 30
    while Conversation.objects.get(id=conversation_id).active_turn_shown.get("seq") != seq:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the turn's mark never reached seq {seq}")
        time.sleep(0.05)


def first_frame_after_restart(server: Any, session: str, seen: list[dict[str, Any]]) -> float:
    """Connect to the restarted ``server`` as soon as it listens (as the page retries) and
    subscribe after the last frame seen; the monotonic time its first frame arrives."""
    from websockets.sync.client import connect

    while True:
        try:
            ws = connect(
                server.ws, origin="http://127.0.0.1", additional_headers={"Cookie": f"sessionid={session}"}
            )
            break
        except OSError:
            time.sleep(0.02)
    with ws:
        conversation = seen[0]["conversationId"]
        ws.send(
            json.dumps(
                {"type": "chat.subscribe", "conversationId": conversation, "afterSeq": seen[-1]["seq"]}
            )
        )
        json.loads(ws.recv(timeout=60))
        arrived = time.monotonic()
        while json.loads(ws.recv(timeout=60))["type"] != "done":
            pass
    return arrived

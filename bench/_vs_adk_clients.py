"""The clients of ``bench.vs_adk_server``: one agent turn over kgchat's websocket, kgchat's SSE
endpoint and ADK's ``/run_sse``, each timed from the request sent to the last frame."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench._vs_adk_world import World
from bench.support import LOOPBACK

ORIGIN = f"http://{LOOPBACK}"
APP = "kgchat_bench"
QUESTION = "What is Paris connected to?"


@dataclass
class TurnResult:
    started: float  # perf_counter when the request was sent
    elapsed: float  # request sent -> last frame
    tokens: list[float] = field(default_factory=list)  # arrival time of each token frame
    text: str = ""
    conversation_id: str | None = None
    errors: list[str] = field(default_factory=list)


async def _sse_turn(
    client: Any,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    token_of: Callable[[dict[str, Any]], str],
) -> TurnResult:
    """POST ``body``, read the Server-Sent Events to the end; ``token_of`` says which text a frame streams."""
    started = time.perf_counter()
    last = started
    tokens: list[float] = []
    parts: list[str] = []
    errors: list[str] = []
    conversation_id = None
    async with client.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code != 200:
            await response.aread()
            raise RuntimeError(f"{url}: HTTP {response.status_code}: {response.text[:300]}")
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            last = time.perf_counter()
            frame = json.loads(line[5:])
            text = token_of(frame)
            if text:
                tokens.append(last)
                parts.append(text)
            if frame.get("type") == "meta":
                conversation_id = frame["conversationId"]
            elif frame.get("type") == "error" or frame.get("errorCode") or frame.get("error_code"):
                errors.append(str(frame))
    return TurnResult(started, last - started, tokens, "".join(parts), conversation_id, errors)


def _kgchat_token(frame: dict[str, Any]) -> str:
    return str(frame["token"]) if frame.get("type") == "token" else ""


def _adk_token(frame: dict[str, Any]) -> str:
    # /run_sse streams each delta as a partial event, then the whole text once more as the final event.
    if not frame.get("partial"):
        return ""
    parts = (frame.get("content") or {}).get("parts") or []
    return "".join(p.get("text", "") for p in parts if not p.get("thought"))


async def _ws_turn(ws: Any, request: dict[str, Any]) -> TurnResult:
    started = time.perf_counter()
    await ws.send(json.dumps(request))
    tokens: list[float] = []
    parts: list[str] = []
    errors: list[str] = []
    conversation_id = None
    while True:
        frame = json.loads(await ws.recv())
        now = time.perf_counter()
        kind = frame.get("type")
        if kind == "token":
            tokens.append(now)
            parts.append(frame["token"])
        elif kind == "meta":
            conversation_id = frame["conversationId"]
        elif kind == "error":
            errors.append(f"{frame.get('code')}: {frame.get('error')}")
            if "seq" not in frame:
                break
        if kind == "done":
            break
    return TurnResult(started, now - started, tokens, "".join(parts), conversation_id, errors)


class Clients:
    """The three ways of running one turn: kgchat websocket, kgchat SSE, ADK ``/run_sse``."""

    def __init__(self, world: World, kgchat_port: int, adk_port: int) -> None:
        import httpx

        self.world = world
        self.kgchat = f"http://127.0.0.1:{kgchat_port}"
        self.kgchat_ws = f"ws://127.0.0.1:{kgchat_port}"
        self.adk = f"http://127.0.0.1:{adk_port}"
        limits = httpx.Limits(max_connections=400, max_keepalive_connections=400)
        timeout = httpx.Timeout(120.0)
        self.http = httpx.AsyncClient(limits=limits, timeout=timeout)

    async def close(self) -> None:
        await self.http.aclose()

    async def connect(self, path: str = "/ws/chat/") -> Any:
        from websockets.asyncio.client import connect

        return await connect(
            f"{self.kgchat_ws}{path}",
            origin=ORIGIN,  # type: ignore[arg-type]
            additional_headers={"Cookie": f"sessionid={self.world.session}"},
            open_timeout=120,
            max_size=None,
        )

    def _kgchat_request(self, conversation_id: str | None, message: str) -> dict[str, Any]:
        if conversation_id is None:
            return {
                "message": message,
                "projectId": self.world.project_id,
                "agentDefinitionId": self.world.agent_id,
            }
        return {"message": message, "conversationId": conversation_id}

    async def ws_turn(self, ws: Any, conversation_id: str | None, message: str = QUESTION) -> TurnResult:
        return await _ws_turn(ws, {"type": "chat.message", **self._kgchat_request(conversation_id, message)})

    async def sse_turn(self, conversation_id: str | None, message: str = QUESTION) -> TurnResult:
        return await _sse_turn(
            self.http,
            f"{self.kgchat}/api/chat/stream",
            self._kgchat_request(conversation_id, message),
            {"Authorization": f"Bearer {self.world.token}"},
            _kgchat_token,
        )

    async def adk_session(self) -> str:
        response = await self.http.post(f"{self.adk}/apps/{APP}/users/bench/sessions", json={})
        response.raise_for_status()
        return str(response.json()["id"])

    async def adk_turn(self, session_id: str, message: str = QUESTION) -> TurnResult:
        body = {
            "app_name": APP,
            "user_id": "bench",
            "session_id": session_id,
            "new_message": {"role": "user", "parts": [{"text": message}]},
            "streaming": True,
        }
        result = await _sse_turn(self.http, f"{self.adk}/run_sse", body, {}, _adk_token)
        result.conversation_id = session_id
        return result


async def echo_turn(ws: Any, frames: int) -> TurnResult:
    """Ask the echo consumer (``bench/_vs_adk_asgi.py``) for ``frames`` token frames and a ``done``."""
    return await _ws_turn(ws, {"frames": frames})

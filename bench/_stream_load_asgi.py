"""kgchat's ASGI application, noting when each chat message reaches the server; ``/bench/first-request/``.

A ``chat.message`` websocket frame is noted when daphne hands it to the application, a
``POST /api/chat/stream`` when its body has arrived (both by the message text, in
``bench._stream_load_server.RECEIVED``). ``GET /bench/first-request/`` answers, for every question
the model has seen since the last call, ``[received, first model request]`` (``time.perf_counter``
of this process) and forgets them. With ``BENCH_TRACE=1`` a websocket's first token frame of each
question is noted too, and ``GET /bench/trace/`` answers each question's timeline and the
collector's pauses (``bench.capacity --trace``). Bench only: the served app is otherwise kgchat's own.
"""

from __future__ import annotations

import json
import time
from typing import Any

from bench import _stream_load_server as stamps
from config.asgi import application as kgchat_application

PROBE_PATH = "/bench/first-request/"
TRACE_PATH = "/bench/trace/"
SSE_PATH = "/api/chat/stream"


def _note(raw: str | bytes | None) -> str | None:
    if not raw:
        return None
    try:
        content = json.loads(raw)
    except ValueError:
        return None
    if isinstance(content, dict) and isinstance(content.get("message"), str):
        stamps.RECEIVED.setdefault(content["message"], time.perf_counter())
        return content["message"]
    return None


async def _answer(send: Any, data: Any) -> None:
    body = json.dumps(data).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _trace(send: Any) -> None:
    questions = {
        question: {
            "received": stamps.RECEIVED.get(question),
            "requests": requests,
            "first_text": stamps.FIRST_TEXT.get(question),
            "first_sent": stamps.FIRST_SENT.get(question),
        }
        for question, requests in stamps.REQUESTS.items()
    }
    pauses = list(stamps.PAUSES)
    for kept in (
        stamps.RECEIVED,
        stamps.FIRST_REQUEST,
        stamps.REQUESTS,
        stamps.FIRST_TEXT,
        stamps.FIRST_SENT,
    ):
        kept.clear()
    stamps.PAUSES.clear()
    await _answer(send, {"questions": questions, "pauses": pauses})


async def _probe(send: Any) -> None:
    pairs = {
        question: [stamps.RECEIVED[question], first]
        for question, first in stamps.FIRST_REQUEST.items()
        if question in stamps.RECEIVED
    }
    stamps.RECEIVED.clear()
    stamps.FIRST_REQUEST.clear()
    await _answer(send, pairs)


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope.get("path") == PROBE_PATH:
        return await _probe(send)
    if scope["type"] == "http" and scope.get("path") == TRACE_PATH:
        return await _trace(send)
    if scope["type"] == "websocket":
        asked: list[str] = []  # the question whose first token frame is still to be noted

        async def receive_noted() -> Any:
            message = await receive()
            if message.get("type") == "websocket.receive" and '"chat.message"' in (message.get("text") or ""):
                question = _note(message.get("text"))
                if question is not None and stamps.TRACE:
                    asked[:] = [question]
            return message

        async def send_noted(message: Any) -> Any:
            if (
                asked
                and message.get("type") == "websocket.send"
                and '"type": "token"' in (message.get("text") or "")
            ):
                stamps.FIRST_SENT.setdefault(asked.pop(), time.perf_counter())
            return await send(message)

        return await kgchat_application(scope, receive_noted, send_noted if stamps.TRACE else send)
    if scope["type"] == "http" and scope.get("path") == SSE_PATH and scope.get("method") == "POST":
        body: list[bytes] = []

        async def receive_body() -> Any:
            message = await receive()
            if message.get("type") == "http.request":
                body.append(message.get("body", b""))
                if not message.get("more_body"):
                    _note(b"".join(body))
            return message

        return await kgchat_application(scope, receive_body, send)
    return await kgchat_application(scope, receive, send)

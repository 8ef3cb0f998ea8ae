"""A real local OpenAI-compatible HTTP server for tests, which misbehaves on purpose.

Queue what the next requests get, then point a provider at ``server.base_url``::

    with LLMTestServer() as server:
        server.enqueue(Stream(text_chunks("Hello ", "world"), usage={"prompt_tokens": 3, "completion_tokens": 2}))
        server.enqueue(Status(429, headers={"Retry-After": "0"}), Stream(tool_call_chunks("t", {"q": "x"})))

Plans: ``Stream`` (SSE chunks, optional usage chunk, ``[DONE]`` unless ``done=False``, ``truncate``
to cut the connection mid-stream, ``gate`` to hold it mid-stream until an event is set), ``Json``
(a non-streaming answer) and ``Status`` (an HTTP error such as 500 or 429 with ``Retry-After``). Requests are recorded in ``server.requests``.
With an empty queue the server answers 500.

Concurrent turns cannot share one queue: give the server a ``responder`` instead, a function
that decides each answer from the request itself (it runs in the request's own thread, so it
may wait). Queued plans still come first. ``answer_at_once`` is one that answers every request
at once; ``last_user_text`` and ``tool_results`` read a request::

    with LLMTestServer(responder=answer_at_once) as server:
        ...
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Stream:
    chunks: list[dict[str, Any] | str]
    usage: dict[str, int] | None = None
    done: bool = True
    finish_reason: str | None = "stop"
    truncate: bool = False
    delay: float = 0.0
    # Hold the stream after its first ``gate_after`` chunks until ``gate`` is set (at most
    # ``gate_timeout`` s): a turn that is under way until the test lets it finish.
    gate: threading.Event | None = None
    gate_after: int = 0
    gate_timeout: float = 60.0


@dataclass
class Json:
    body: dict[str, Any]


@dataclass
class Status:
    code: int
    body: dict[str, Any] = field(default_factory=lambda: {"error": {"message": "server error"}})
    headers: dict[str, str] = field(default_factory=dict)


Plan = Stream | Json | Status
# Decides the answer to one request (its JSON body) when no plan is queued.
Responder = Callable[[dict[str, Any]], Plan]


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def text_chunks(*texts: str) -> list[dict[str, Any] | str]:
    first: list[dict[str, Any] | str] = [_chunk({"role": "assistant", "content": ""})]
    return first + [_chunk({"content": t}) for t in texts]


def tool_call_chunks(
    name: str, arguments: dict[str, Any] | str, *, call_id: str = "call_1", index: int = 0, pieces: int = 3
) -> list[dict[str, Any] | str]:
    """A tool call whose JSON arguments arrive split in ``pieces`` chunks."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    size = max(1, -(-len(raw) // pieces))
    parts = [raw[i : i + size] for i in range(0, len(raw), size)] or [""]
    out: list[dict[str, Any] | str] = [
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        )
    ]
    out += [_chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}) for p in parts]
    return out


def completion(content: str | None = None, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def last_user_text(request: dict[str, Any]) -> str:
    """The text of the request's last user message ("" if it has none)."""
    for message in reversed(request.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def constrained_schema(request: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON Schema a request's answer must follow, sent as OpenAI's ``response_format`` or, to
    llama.cpp (``local/…``), as an llguidance ``grammar`` (``%llguidance {}`` then ``start: %json
    <schema>``); None for a free-text request."""
    response_format = request.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return dict(response_format["json_schema"]["schema"])
    grammar = request.get("grammar")
    if isinstance(grammar, str) and "%json " in grammar:
        schema = json.loads(grammar.split("%json ", 1)[1])
        schema.pop("x-guidance", None)
        return dict(schema)
    return None


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool messages that follow the request's last user message: the results of this
    turn's tool calls so far (none on the turn's first model call)."""
    found: list[dict[str, Any]] = []
    for message in reversed(request.get("messages") or []):
        if message.get("role") == "user":
            break
        if message.get("role") == "tool":
            found.append(message)
    return found[::-1]


def answer_at_once(request: dict[str, Any]) -> Plan:
    """A short streamed text answer with usage, sent at once, whatever was asked."""
    return Stream(text_chunks("Here is ", "the answer."), usage={"prompt_tokens": 10, "completion_tokens": 4})


class LLMTestServer:
    def __init__(self, responder: Responder | None = None) -> None:
        self.responder = responder
        self.plans: deque[Plan] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.headers.append(dict(self.headers.items()))
                    plan = server.plans.popleft() if server.plans else None
                if plan is None:
                    # Outside the lock: a responder may wait (a turn held until a test releases it).
                    responder = server.responder
                    plan = responder(body) if responder else Status(500, {"error": "no plan queued"})
                try:
                    server._answer(self, plan)
                except (BrokenPipeError, ConnectionResetError):
                    # The client went away mid-answer (a cancelled turn): nothing more to send.
                    self.close_connection = True

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def enqueue(self, *plans: Plan) -> None:
        with self._lock:
            self.plans.extend(plans)

    def start(self) -> LLMTestServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LLMTestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, plan: Plan) -> None:
        if isinstance(plan, Status):
            data = json.dumps(plan.body).encode()
            handler.send_response(plan.code)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for key, value in plan.headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(data)
            return
        if isinstance(plan, Json):
            data = json.dumps(plan.body).encode()
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.end_headers()
        chunks = list(plan.chunks)
        if plan.truncate:
            # Close the connection after the chunks: no finish_reason, no [DONE].
            for chunk in chunks:
                text = chunk if isinstance(chunk, str) else json.dumps(chunk)
                handler.wfile.write(f"data: {text}\n\n".encode())
            handler.wfile.flush()
            handler.close_connection = True
            return
        if plan.finish_reason is not None:
            chunks.append(_chunk({}, plan.finish_reason))
        if plan.usage is not None:
            chunks.append(
                {"id": "chatcmpl-test", "object": "chat.completion.chunk", "choices": [], "usage": plan.usage}
            )
        if plan.gate is not None and plan.gate_after == 0:  # held before its first chunk
            plan.gate.wait(plan.gate_timeout)
        for sent, chunk in enumerate(chunks, start=1):
            text = chunk if isinstance(chunk, str) else json.dumps(chunk)
            handler.wfile.write(f"data: {text}\n\n".encode())
            handler.wfile.flush()
            if plan.delay:
                threading.Event().wait(plan.delay)
            if plan.gate is not None and sent == plan.gate_after:
                plan.gate.wait(plan.gate_timeout)
        if plan.done:
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.wfile.flush()

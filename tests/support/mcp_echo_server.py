"""A tiny MCP server for tests of agents' external MCP servers, built on the ``mcp`` SDK.

    python tests/support/mcp_echo_server.py stdio
    python tests/support/mcp_echo_server.py http [--token SECRET]
    python tests/support/mcp_echo_server.py redirect --to URL

``http`` and ``redirect`` listen on 127.0.0.1 on a free port and print ``PORT <n>`` first.
``http`` serves streamable HTTP at ``/mcp`` (with ``--token``: only to ``Authorization: Bearer``
that token); ``redirect`` answers every request with a 307 to ``URL``. The one tool is ``shout``.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer(name="echo", version="1", log_level="WARNING")


@server.tool(description="Repeat a text in capitals, with an exclamation mark.")
def shout(text: str) -> str:
    return text.upper() + "!"


def _listen() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    return sock


def _with_token(app: Any, token: str) -> Any:
    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


def _redirect(to: str) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = [(b"location", to.encode()), (b"content-length", b"0")]
        await send({"type": "http.response.start", "status": 307, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    return app


def _serve(app: Any) -> None:
    import uvicorn

    sock = _listen()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["stdio", "http", "redirect"])
    parser.add_argument("--token")
    parser.add_argument("--to")
    args = parser.parse_args()
    if args.mode == "stdio":
        asyncio.run(server.run_stdio_async())
    elif args.mode == "http":
        app = server.streamable_http_app(stateless_http=True, json_response=True)
        _serve(_with_token(app, args.token) if args.token else app)
    else:
        _serve(_redirect(args.to))


if __name__ == "__main__":
    sys.exit(main())

"""kgchat's ASGI application plus ``/ws/bench-echo/``: the ceiling ``bench.vs_adk_server`` compares with.

The echo consumer is the least a Channels consumer can do to stream: for ``{"frames": n}`` it
sends n token-shaped JSON frames and a ``done`` frame, with no turn, no bus and no database.
"""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from config.asgi import application as kgchat_application

ECHO_PATH = "/ws/bench-echo/"


class EchoConsumer(AsyncJsonWebsocketConsumer):
    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        frames = max(0, min(int(content.get("frames", 200)), 10_000))
        for i in range(frames):
            await self.send_json({"type": "token", "token": f"t{i} ", "seq": i + 1})
        await self.send_json({"type": "done", "messageId": None, "runId": None, "seq": frames + 1})


echo_application = EchoConsumer.as_asgi()


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "websocket" and scope.get("path") == ECHO_PATH:
        return await echo_application(scope, receive, send)
    return await kgchat_application(scope, receive, send)

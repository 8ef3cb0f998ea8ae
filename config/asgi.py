"""The ASGI application: Django for HTTP, the MCP server at /mcp, Channels for the chat websocket."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys

# Importing the application makes ~280,000 objects that live as long as the process, and the
# cyclic collector walked them over and over while they were made (five full collections, ~0.4 of
# the import's ~2.3 s): it is off until ``_heap_frozen`` collects once, at the end.
_collector_was_on = gc.isenabled()
gc.disable()

from django.core.asgi import get_asgi_application  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from apps.chat.transports.routing import websocket_urlpatterns  # noqa: E402
from apps.chat.turns.service import recover_once  # noqa: E402
from apps.graph_tools.mcp_server import mcp_asgi_app  # noqa: E402

mcp_app = mcp_asgi_app()
# One process on a laptop serves its own CSS and JS; in production a web server does
# (docker-compose.yml puts Caddy in front, with KGCHAT_SERVE_STATIC off).
django_http = ASGIStaticFilesHandler(django_asgi_app) if settings.KGCHAT_SERVE_STATIC else django_asgi_app


async def http_app(scope, receive, send):
    """Route ``/mcp`` to the MCP server (PROTOCOL §6), everything else to Django."""
    path = scope.get("path", "")
    if path == "/mcp" or path.startswith("/mcp/"):
        return await mcp_app(scope, receive, send)
    return await django_http(scope, receive, send)


router = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)


async def _recover() -> None:
    try:
        await recover_once()
    except Exception:
        logging.getLogger("kgchat.recovery").exception("recovering interrupted turns failed; retrying later")


def _recover_as_daphne_starts() -> None:
    """Under daphne (Twisted's asyncio reactor, no ASGI lifespan): start taking over turns as soon
    as the server runs, not at its first request, so a restarted process goes on with the turns its
    predecessor was running whether or not a client comes back (``recovery.takeover_start``)."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None or type(reactor).__name__ != "AsyncioSelectorReactor":
        return
    reactor.callLater(0, lambda: asyncio.ensure_future(_recover()))  # once its event loop runs


_recover_as_daphne_starts()


async def application(scope, receive, send):
    """The router, behind crash recovery: a process's first request starts its takeover of turns
    whose lease lapsed (their process died), and waits until dead processes' batch runs are closed."""
    if scope["type"] in ("http", "websocket"):
        await _recover()
    return await router(scope, receive, send)


def _heap_frozen() -> None:
    """Move what importing the application made (Django, Channels, ADK and the model SDKs: ~280,000
    objects that live as long as the process) out of the cyclic collector's reach (``gc.freeze``),
    after one collection so that no garbage is kept. A full collection walks every tracked object
    while the whole process waits: under load one came every 15-20 s and stopped every stream for
    220-290 ms; without the startup heap it walks only what turns made since, 30-75 ms
    (docs/benchmarks.md)."""
    gc.collect()
    gc.freeze()
    if _collector_was_on:
        gc.enable()


_heap_frozen()

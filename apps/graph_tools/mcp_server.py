"""The graph tools as an MCP server (PROTOCOL §6): streamable HTTP at ``/mcp`` and stdio.

Tools are listed from the one registry with their JSON Schemas and every call goes through
``services.tool_call_direct`` (as the REST route does), so MCP can do nothing that REST cannot: a
write tool needs an editor's or owner's token and ``KGCHAT_DIRECT_WRITES``, else it answers an
``isError`` result saying approval is required. A tool failure becomes an
``isError`` result carrying the message.

HTTP: ``Authorization: Bearer <api token>`` only. The project is the token's, or the one named
by ``X-Project-ID`` (id or slug), which must be a project the token's user may see. The
transport is stateless with JSON responses, so any of several server processes can answer any
request; it offers no stream of its own, so a GET (or any method but POST) answers ``405`` at once
with ``Allow: POST``, as the transport's specification lets a server without one. Daphne sends no ASGI lifespan events, so the SDK's session manager is started on the
first request (once per event loop).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, ListToolsResult, TextContent, ToolAnnotations
from mcp_types import Tool as MCPTool

from apps.core.errors import ServiceError
from apps.core.failures import error_classify
from apps.core.inputs import input_check
from apps.graph_tools.errors import McpUnauthorized, UnknownTool
from apps.graph_tools.registry import tool_get
from apps.graph_tools.selectors import project_tools
from apps.graph_tools.services import tool_call_direct
from apps.projects.selectors import Principal, principal_from_token, project_get, project_get_by_ref

log = logging.getLogger("kgchat.mcp")

# What /mcp answers: JSON-RPC messages POSTed (the streamable HTTP transport, stateless).
ALLOWED_METHODS = "POST"
PROJECT_SCOPE_KEY = "kgchat.project_id"
PRINCIPAL_SCOPE_KEY = "kgchat.principal"
INSTRUCTIONS = (
    "Tools over one project's knowledge graph. Start with hybrid_search to find entities, then "
    "get_entity_edges or traverse_graph to follow relationships; schema_version, list_entity_types and "
    "list_relationships describe the graph. Entities are named by id or key."
)


class GraphMCPServer(MCPServer):
    """An MCP server whose tools are the graph tool registry, scoped to one project per call.

    ``project_id`` fixes the project (stdio); over HTTP it comes from the authenticated request.
    """

    def __init__(self, *, project_id: uuid.UUID | None = None) -> None:
        super().__init__(name="kgchat-graph", instructions=INSTRUCTIONS, version="1", log_level="WARNING")
        self.project_id = project_id

    async def _handle_list_tools(self, ctx: Any, params: Any) -> ListToolsResult:
        # The SDK's list_tools() has no request; the project comes from it (the token's).
        return ListToolsResult(tools=await self.list_tools(project_id=self._project_of(ctx)))

    async def list_tools(self, project_id: uuid.UUID | None = None) -> list[MCPTool]:
        """The registry's tools, their schemas naming the project's own types (query_paths)."""
        project_id = project_id or self.project_id
        items = await sync_to_async(project_tools)(project_id=project_id) if project_id else []
        return [
            MCPTool(
                name=item.tool.name,
                description=item.tool.description,
                input_schema=item.input_schema,
                annotations=ToolAnnotations(
                    read_only_hint=item.tool.read_only,
                    destructive_hint=item.tool.destructive,
                    open_world_hint=False,
                ),
            )
            for item in items
        ]

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        try:
            return tool_get(name).input_schema()
        except UnknownTool:
            return None

    def _scope_of(self, context: Any) -> dict[str, Any]:
        # A tool call's Context wraps the request context; tools/list gets the request context itself.
        request_context = getattr(context, "_request_context", None) or context
        request = getattr(request_context, "request", None)
        return getattr(request, "scope", None) or {}

    def _project_of(self, context: Any) -> uuid.UUID | None:
        if self.project_id is not None:
            return self.project_id
        project_id = self._scope_of(context).get(PROJECT_SCOPE_KEY)
        return project_id if isinstance(project_id, uuid.UUID) else None

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> CallToolResult:
        project_id = self._project_of(context)
        if project_id is None:
            return _error_result("no project: this request carries no authenticated project", "unauthorized")
        # Over HTTP, the token's user; the stdio server (project fixed by an operator) has none.
        principal = None if self.project_id is not None else self._scope_of(context).get(PRINCIPAL_SCOPE_KEY)
        if self.project_id is None and not isinstance(principal, Principal):
            return _error_result("no principal: this request carries no authenticated user", "unauthorized")
        try:
            result = await tool_call_direct(
                principal=principal, project_id=project_id, name=name, arguments=arguments
            )
        except Exception as exc:
            failure = error_classify(exc, where=f"MCP tool {name}")
            return _error_result(failure.message, failure.code)
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
        )


def _error_result(message: str, code: str = "invalid_request") -> CallToolResult:
    """An ``isError`` result: the message as text, and ``{"error", "code"}`` (REST's error body)."""
    return CallToolResult(
        content=[TextContent(type="text", text=message)],
        structured_content={"error": message, "code": code},
        is_error=True,
    )


def mcp_project_resolve(
    *, authorization_secret: str | None, project_ref: str | None
) -> tuple[uuid.UUID, Principal]:
    """Return the project an MCP request works on, from its API token and optional ``X-Project-ID``,
    and the token's principal."""
    principal = principal_from_token(secret=authorization_secret or "")
    if principal is None:
        raise McpUnauthorized()
    if project_ref:
        input_check(project_ref, field="X-Project-ID")
        return project_get(principal=principal, project_ref=project_ref).id, principal
    if principal.token_project_id is not None:
        # A bound token is only as good as its user's membership, however that membership ended
        # (the members API revokes tokens, a Django admin inline deletion does not).
        return project_get(principal=principal, project_ref=principal.token_project_id).id, principal
    raise ServiceError(
        "this token is not bound to a project: name one with the X-Project-ID header", code="project_required"
    )


async def _send_json(
    send: Any, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class McpHttpApp:
    """ASGI app serving the MCP streamable HTTP endpoint, with kgchat's token auth in front."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: GraphMCPServer | None = None
        self._ready: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None

    async def _session_manager(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # First request on this event loop: a session manager runs once, in one loop.
            self._loop, self._ready = loop, asyncio.Event()
            self._server = GraphMCPServer()
            # Requests are authenticated here (a bearer token, not a cookie), and the Host header
            # is checked against ALLOWED_HOSTS below, so the SDK's localhost-only guard is off.
            self._server.streamable_http_app(
                stateless_http=True,
                json_response=True,
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            self._runner = loop.create_task(self._run(self._server, self._ready))
        assert self._ready is not None and self._server is not None
        await self._ready.wait()
        return self._server.session_manager

    @staticmethod
    async def _run(server: GraphMCPServer, ready: asyncio.Event) -> None:
        async with server.session_manager.run():
            ready.set()
            await asyncio.Event().wait()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host, _port = split_domain_port(headers.get("host", ""))
        if not host or not validate_host(host, settings.ALLOWED_HOSTS):
            await _send_json(send, 400, {"error": "host not allowed", "code": "bad_host"}, [])
            return
        if scope.get("method") != "POST":
            # The transport is stateless and pushes nothing: no listening GET stream (which would
            # only carry pings, holding a connection for ever), no session to DELETE.
            message = f"method not allowed: {scope.get('method')} /mcp; MCP requests are POSTed here"
            body = {"error": message, "code": "method_not_allowed"}
            await _send_json(send, 405, body, [(b"allow", ALLOWED_METHODS.encode())])
            return
        request_body = await _body_within(receive, settings.KGCHAT_MCP_MAX_BYTES)
        if request_body is None:
            limit = settings.KGCHAT_MCP_MAX_BYTES
            message = f"the request body is too large: at most {limit} bytes (KGCHAT_MCP_MAX_BYTES)"
            await _send_json(send, 413, {"error": message, "code": "payload_too_large"}, [])
            return
        scheme, _, value = headers.get("authorization", "").partition(" ")
        secret = value.strip() if scheme.lower() == "bearer" else None
        try:
            project_id, principal = await sync_to_async(mcp_project_resolve)(
                authorization_secret=secret, project_ref=headers.get("x-project-id")
            )
        except ServiceError as exc:
            extra = [(b"www-authenticate", b"Bearer")] if exc.status == 401 else []
            await _send_json(send, exc.status, {"error": exc.message, "code": exc.code}, extra)
            return
        manager = await self._session_manager()
        await manager.handle_request(
            {**scope, PROJECT_SCOPE_KEY: project_id, PRINCIPAL_SCOPE_KEY: principal},
            _replay(request_body, receive),
            send,
        )


async def _body_within(receive: Any, limit: int) -> bytes | None:
    """The request's body, read whole, or None once it passes ``limit`` bytes (the rest unread):
    the SDK reads a body whole into memory, with no limit of its own."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Any:
    """An ASGI ``receive`` giving ``body`` as one message, then the connection's own (its disconnect)."""
    sent = False

    async def replayed() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def mcp_asgi_app() -> McpHttpApp:
    return McpHttpApp()


async def mcp_stdio_serve(*, project_ref: str) -> None:
    """Serve the graph tools of one project (id or slug, no access check: operators) over stdin/stdout
    until the client closes them; an unknown project raises ``ProjectNotFound`` before serving."""
    project = await sync_to_async(project_get_by_ref)(project_ref=project_ref)
    await GraphMCPServer(project_id=project.id).run_stdio_async()


__all__ = ["GraphMCPServer", "McpHttpApp", "mcp_asgi_app", "mcp_stdio_serve"]

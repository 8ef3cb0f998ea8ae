"""Tools for ADK agents: graph registry tools (in process) and external MCP servers."""

from __future__ import annotations

import functools
import logging
import re
import uuid
from collections.abc import Mapping
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.conf import settings
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.mcp_tool.mcp_session_manager import (
    CheckableMcpHttpClientFactory,
    SseConnectionParams,
    StdioConnectionParams,
    StreamableHTTPConnectionParams,
)
from google.adk.tools.mcp_tool.mcp_toolset import McpToolset
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from mcp import StdioServerParameters

from apps.agents.adk.mcp_http import guarded_client_factory
from apps.agents.approvals import WriteGate
from apps.agents.mcp_servers import (
    InvalidMcpServer,
    McpServerSpec,
    StdioServerRef,
    mcp_server_parse,
    stdio_server_get,
    url_check,
)
from apps.core.errors import ServiceError
from apps.core.timeouts import wait_within
from apps.graph_tools.registry import GraphTool, GraphVocabulary, tool_available, tool_call, tool_get
from apps.graph_tools.selectors import graph_vocabulary

logger = logging.getLogger(__name__)


def adk_name(name: str) -> str:
    """An agent name ADK accepts (a Python identifier, not ``user``)."""
    cleaned = re.sub(r"\W", "_", name.strip()) or "agent"
    if cleaned[0].isdigit():
        cleaned = f"_{cleaned}"
    return "user_agent" if cleaned == "user" else cleaned


class GraphAdkTool(BaseTool):
    """One graph registry tool, scoped to a project. A ``ToolError`` becomes ``{"error", "code"}``.

    A call running longer than ``KGCHAT_TOOL_TIMEOUT_SECONDS`` is abandoned with a ``timeout``
    error result, so a hung query cannot hold the turn until the turn's own timeout.
    """

    def __init__(self, tool: GraphTool, *, project_id: uuid.UUID, gate: WriteGate | None = None) -> None:
        super().__init__(name=tool.name, description=tool.description)
        self.graph_tool = tool
        self.project_id = project_id
        self.gate = gate
        # The project's types, for a tool whose schema names them (set by ``GraphToolset``).
        self.vocabulary: GraphVocabulary | None = None

    def _get_declaration(self) -> types.FunctionDeclaration:
        # A shallow copy of the tool's one declaration: ADK asks for it on every model call
        # (2 x 10 a graph-query-agent turn), and a deep copy of the schema plus a validated
        # declaration each time was ~4 ms of a turn's CPU. Nothing changes a declaration's schema.
        return _declaration(self.graph_tool, self.vocabulary).model_copy()

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        limit = settings.KGCHAT_TOOL_TIMEOUT_SECONDS
        if self.graph_tool.read_only or self.gate is None:
            # Without a gate a write tool answers approval_required and writes nothing.
            work = tool_call(project_id=self.project_id, name=self.name, arguments=args)
        else:
            call_id = tool_context.function_call_id or f"call_{self.name}"
            work = self.gate.call(self.name, dict(args or {}), call_id=call_id)
        try:
            result = await wait_within(work, limit)
        except ServiceError as exc:
            return {"error": exc.message, "code": exc.code}
        except TimeoutError:
            return {"error": f"tool timed out after {limit} s", "code": "timeout"}
        # Whole: the model adapter gives the model its copy (``apps.agents.tool_results``).
        return result


@functools.lru_cache(maxsize=256)
def _declaration(tool: GraphTool, vocabulary: GraphVocabulary | None = None) -> types.FunctionDeclaration:
    return types.FunctionDeclaration(
        name=tool.name, description=tool.description, parameters_json_schema=tool.input_schema(vocabulary)
    )


# (project, graph version) -> the project's types: its types change only with its graph version.
_VOCABULARIES: dict[tuple[uuid.UUID, int], GraphVocabulary] = {}
_VOCABULARIES_MAX = 256


async def project_vocabulary(project_id: uuid.UUID, graph_version: int | None) -> GraphVocabulary:
    """The project's types, read once per graph version (every turn when the version is unknown)."""
    key = (project_id, graph_version) if graph_version is not None else None
    if key is not None and key in _VOCABULARIES:
        return _VOCABULARIES[key]
    vocabulary = await sync_to_async(graph_vocabulary)(project_id=project_id)
    if key is not None:
        if len(_VOCABULARIES) >= _VOCABULARIES_MAX:
            _VOCABULARIES.pop(next(iter(_VOCABULARIES)))
        _VOCABULARIES[key] = vocabulary
    return vocabulary


def graph_tools(
    names: list[str], *, project_id: uuid.UUID, gate: WriteGate | None = None
) -> list[GraphAdkTool]:
    """The registry tools named in an agent definition; unknown names are skipped with a warning.
    Write tools go through ``gate`` (none: they answer ``approval_required``)."""
    tools: list[GraphAdkTool] = []
    for name in names:
        try:
            tools.append(GraphAdkTool(tool_get(name), project_id=project_id, gate=gate))
        except ServiceError:
            logger.warning("agent definition names unknown graph tool %r; skipped", name)
    return tools


class GraphToolset(BaseToolset):
    """An agent's graph tools as one toolset.

    ADK prepares every model request tool union by tool union: a task to resolve it, then a
    ``ToolContext`` for it. Ten graph tools listed one by one cost ten of each per model call; as
    one toolset, one. The model sees the same declarations and ADK calls the same tools, except a
    tool whose ``available`` check says it has nothing to work on in the project (checked once).
    """

    def __init__(
        self,
        tools: list[GraphAdkTool],
        *,
        project_id: uuid.UUID | None = None,
        graph_version: int | None = None,
        available: Mapping[str, bool] | None = None,
    ) -> None:
        super().__init__()
        known = available or {}
        # What the caller read already (a chat turn, with its admission): no read of its own.
        self.tools: list[BaseTool] = [t for t in tools if known.get(t.name, True)]
        self._per_project = [t for t in tools if t.graph_tool.per_project]
        self._project_id = project_id
        self._graph_version = graph_version
        # Whether the tools with an availability check were checked (none: nothing to check).
        self._checked = all(t.graph_tool.available is None or t.name in known for t in tools)

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        if self._project_id is not None and not self._checked:
            # Once a turn: the tools with nothing to work on in this project are left out.
            self.tools = await sync_to_async(_available_tools)(self.tools, self._project_id)
            self._checked = True
        if self._per_project and self._project_id is not None:
            # Once a turn (once a graph version): the schemas that name the project's types.
            vocabulary = await project_vocabulary(self._project_id, self._graph_version)
            for tool in self._per_project:
                tool.vocabulary = vocabulary
            self._per_project = []
        return self.tools


def _available_tools(tools: list[BaseTool], project_id: uuid.UUID) -> list[BaseTool]:
    """``tools`` without the graph tools whose ``available`` check says no in the project."""
    return [t for t in tools if not isinstance(t, GraphAdkTool) or tool_available(t.graph_tool, project_id)]


class SafeMcpToolset(McpToolset):
    """An ``McpToolset`` whose unreachable (or refused) server means "no tools", not a crashed run."""

    def __init__(self, *, server_name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.server_name = server_name
        # ADK swaps the HTTP client factory for its own (following redirects, unpinned) when it
        # finds Google mTLS credentials; the guarded factory must be the only way out.
        self._mcp_session_manager._get_mtls_transport = _no_mtls_transport  # type: ignore[method-assign]

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        try:
            return await super().get_tools(readonly_context)
        except Exception as exc:  # any transport or protocol failure of an external server
            logger.warning("MCP server %r unavailable: %s", self.server_name, exc)
            return []


async def _no_mtls_transport() -> None:
    return None


# ADK types the factory against httpx 1.x for checkers, while MCP SDK 2.x (installed) uses httpx2.
_GUARDED_FACTORY = cast(CheckableMcpHttpClientFactory, guarded_client_factory)


def _connection(
    spec: McpServerSpec,
) -> StdioConnectionParams | StreamableHTTPConnectionParams | SseConnectionParams:
    """ADK connection parameters; a stdio server's command comes from the operator's settings only."""
    if isinstance(spec, StdioServerRef):
        config = stdio_server_get(spec.stdio)
        return StdioConnectionParams(
            server_params=StdioServerParameters(command=config.command, args=config.args, env=config.env)
        )
    # The URL is checked again (with a fresh DNS lookup) by the guarded client on every request.
    url_check(spec.url, resolve_dns=False)
    headers = dict(spec.headers or {})
    if spec.transport == "sse":
        return SseConnectionParams(url=spec.url, headers=headers, httpx_client_factory=_GUARDED_FACTORY)
    return StreamableHTTPConnectionParams(
        url=spec.url, headers=headers, httpx_client_factory=_GUARDED_FACTORY
    )


def mcp_toolsets(servers: list[Any]) -> list[McpToolset]:
    """Toolsets for an agent definition's ``mcp_servers`` (see ``apps.agents.mcp_servers``).

    An entry that is not allowed by the operator's settings now (a legacy command, a stdio name
    no longer configured, a URL off the allowlist) is skipped with a warning, never run.
    """
    toolsets: list[McpToolset] = []
    for i, raw in enumerate(servers or []):
        try:
            spec = mcp_server_parse(raw)
            params = _connection(spec)
        except InvalidMcpServer as exc:
            logger.warning("mcp_servers[%d] skipped: %s", i, exc.message)
            continue
        name = spec.stdio if isinstance(spec, StdioServerRef) else (spec.name or spec.url)
        toolsets.append(
            SafeMcpToolset(server_name=name, connection_params=params, tool_filter=spec.tool_filter or None)
        )
    return toolsets

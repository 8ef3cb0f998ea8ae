"""Tools for ADK agents: graph registry tools (in process) and external MCP servers."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from typing import Any

from django.conf import settings
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.mcp_tool.mcp_session_manager import (
    StdioConnectionParams,
    StreamableHTTPConnectionParams,
)
from google.adk.tools.mcp_tool.mcp_toolset import McpToolset
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from mcp import StdioServerParameters

from apps.graph_tools.registry import GraphTool, tool_call, tool_get
from apps.projects.errors import ServiceError

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

    def __init__(self, tool: GraphTool, *, project_id: uuid.UUID) -> None:
        super().__init__(name=tool.name, description=tool.description)
        self.graph_tool = tool
        self.project_id = project_id

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema=self.graph_tool.input_schema(),
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        limit = settings.KGCHAT_TOOL_TIMEOUT_SECONDS
        try:
            result = await asyncio.wait_for(
                tool_call(project_id=self.project_id, name=self.name, arguments=args), timeout=limit
            )
        except ServiceError as exc:
            return {"error": exc.message, "code": exc.code}
        except TimeoutError:
            return {"error": f"tool timed out after {limit} s", "code": "timeout"}
        return shrink_result(result, max_chars=settings.KGCHAT_TOOL_RESULT_MAX_CHARS)


def _size(value: Any) -> int:
    return len(json.dumps(value, default=str, ensure_ascii=False))


def shrink_result(result: Any, *, max_chars: int) -> Any:
    """Cap what the model is sent: halve the longest lists of a large result until it fits.

    The model is told the result was shortened (``truncated``) so it can ask for less; the
    audit trail and the browser get the result as the tool returned it.
    """
    if max_chars <= 0 or _size(result) <= max_chars:
        return result
    if isinstance(result, dict):
        shrunk = dict(result)
        while _size(shrunk) > max_chars:
            lists = [(len(v), k) for k, v in shrunk.items() if isinstance(v, list) and v]
            if not lists:
                break
            _, key = max(lists)
            shrunk[key] = shrunk[key][: len(shrunk[key]) // 2]
        shrunk["truncated"] = True
        shrunk["note"] = "result shortened to fit the context; ask for fewer results or narrow the query"
        if _size(shrunk) <= max_chars:
            return shrunk
    text = json.dumps(result, default=str, ensure_ascii=False)
    return {"truncated": True, "preview": text[:max_chars]}


def graph_tools(names: list[str], *, project_id: uuid.UUID) -> list[BaseTool]:
    """The registry tools named in an agent definition; unknown names are skipped with a warning."""
    tools: list[BaseTool] = []
    for name in names:
        try:
            tools.append(GraphAdkTool(tool_get(name), project_id=project_id))
        except ServiceError:
            logger.warning("agent definition names unknown graph tool %r; skipped", name)
    return tools


class SafeMcpToolset(McpToolset):
    """An ``McpToolset`` whose unreachable server means "no tools", not a crashed run."""

    def __init__(self, *, server_name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.server_name = server_name

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        try:
            return await super().get_tools(readonly_context)
        except Exception as exc:  # any transport or protocol failure of an external server
            logger.warning("MCP server %r unavailable: %s", self.server_name, exc)
            return []


def mcp_toolsets(servers: list[dict[str, Any]]) -> list[McpToolset]:
    """Toolsets for an agent definition's ``mcp_servers``: ``{"url", "headers"}`` or ``{"command", "args", "env"}``."""
    toolsets: list[McpToolset] = []
    for spec in servers or []:
        name = str(spec.get("name") or spec.get("url") or spec.get("command") or "mcp")
        tool_filter = spec.get("tool_filter") or None
        params: StreamableHTTPConnectionParams | StdioConnectionParams
        if spec.get("url"):
            params = StreamableHTTPConnectionParams(
                url=str(spec["url"]), headers=dict(spec.get("headers") or {})
            )
        elif spec.get("command"):
            params = StdioConnectionParams(
                server_params=StdioServerParameters(
                    command=str(spec["command"]),
                    args=[str(a) for a in spec.get("args") or []],
                    env={str(k): str(v) for k, v in (spec.get("env") or {}).items()} or None,
                )
            )
        else:
            logger.warning("MCP server entry %r has neither url nor command; skipped", name)
            continue
        toolsets.append(SafeMcpToolset(server_name=name, connection_params=params, tool_filter=tool_filter))
    return toolsets

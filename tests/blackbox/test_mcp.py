"""The MCP server at ``/mcp`` through the official ``mcp`` client over streamable HTTP
(docs/protocol.md §6), with an API token made by ``manage.py create_api_token``."""

from __future__ import annotations

import json
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.blackbox.clients import TIMEOUT
from tests.blackbox.covers import covers
from tests.blackbox.protocol import graph_tools
from tests.blackbox.server import Kgchat
from tests.blackbox.world import World


@pytest.fixture(scope="module")
def token(kgchat: Kgchat, world: World) -> str:
    """ada's token for Atlas, made as an operator makes one (printed once)."""
    return kgchat.manage("create_api_token", "ada", "--project", "atlas", "--name", "blackbox").strip()


def mcp_client(world: World, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT)
    return Client(streamable_http_client(f"{world.url}/mcp", http_client=http))


def payload(result: Any) -> dict[str, Any]:
    assert result.is_error is False, result.content
    data: dict[str, Any] = json.loads(result.content[0].text)
    return data


@covers("MCP tools/list", "tools")
async def test_mcp_lists_the_graph_tools_with_their_schemas(world: World, token: str) -> None:
    async with mcp_client(world, token) as client:
        listed = await client.list_tools()

    tools = {t.name: t for t in listed.tools}
    read_tools, write_tools = graph_tools()
    assert set(tools) == read_tools | write_tools
    rest = (
        world.api("ada")
        .call("GET /api/projects/{project_id}/graph/tools", 200, project_id=world.project_id)
        .json()
    )
    assert {t["name"]: t["inputSchema"] for t in rest["items"]} == {
        name: t.input_schema for name, t in tools.items()
    }
    assert all(tools[name].annotations.read_only_hint is True for name in read_tools)
    assert tools["delete_entity"].annotations.destructive_hint is True


@covers("MCP tools/call", "result", "isError")
async def test_mcp_calls_a_tool_on_the_tokens_project_and_reports_bad_arguments_as_errors(
    world: World, token: str
) -> None:
    async with mcp_client(world, token) as client:
        edges = await client.call_tool(
            "get_entity_edges", {"entity_id": "ada-lovelace", "relationship_type": "WORKED_WITH"}
        )
        searched = await client.call_tool("search_entities", {"query": "Engine"})
        bad = await client.call_tool("traverse_graph", {"start_entity_id": "london", "max_depth": 9})
        missing = await client.call_tool("get_entity_edges", {"entity_id": "nobody"})
        write = await client.call_tool("create_entity", {"key": "via-mcp", "type": "T", "name": "Via MCP"})

    assert [e["other"]["key"] for e in payload(edges)["edges"]] == ["charles-babbage"]
    assert payload(searched)["results"][0]["key"] == "analytical-engine"
    assert bad.is_error is True and "max_depth" in bad.content[0].text
    assert missing.is_error is True
    assert write.is_error is True and "approval" in write.content[0].text
    world.api("ada").call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}",
        404,
        "entity_not_found",
        project_id=world.project_id,
        id_or_key="via-mcp",
    )


@covers("MCP initialize", "401")
def test_mcp_without_a_token_is_refused(world: World) -> None:
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "blackbox", "version": "1"},
        },
    }

    refused = httpx.post(
        f"{world.url}/mcp",
        json=hello,
        headers={"Accept": "application/json, text/event-stream"},
        timeout=TIMEOUT,
    )

    assert refused.status_code == 401


@covers("MCP GET", "405")
@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_mcp_answers_a_method_other_than_post_at_once_with_405_and_allow(
    world: World, token: str, method: str
) -> None:
    listening = {
        "Authorization": f"Bearer {token}",
        "X-Project-ID": world.project_id,
        "Accept": "text/event-stream",
    }

    # A few seconds bound a hang: the stream this replaces sent its first byte after 15 s.
    answer = httpx.request(method, f"{world.url}/mcp", headers=listening, timeout=5.0)

    assert answer.status_code == 405
    assert answer.headers["allow"] == "POST"
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["code"] == "method_not_allowed"

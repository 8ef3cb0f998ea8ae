"""The MCP server driven by the official ``mcp`` client: streamable HTTP at /mcp of the real ASGI
app served by daphne on a loopback port (no lifespan events, like production), and stdio through
the management command. Both processes use this test run's database, so data is committed."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from asgiref.sync import sync_to_async
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from apps.core.errors import ServiceError
from apps.graph_tools.mcp_server import mcp_project_resolve
from apps.graph_tools.models import GraphObject
from apps.graph_tools.registry import tool_get, tool_names
from tests.factories import add_member, make_entity, make_project, make_token, make_user
from tests.graph_tools.conftest import SmallGraph, build_small_graph
from tests.support.mcp_daphne import child_env, mcp_daphne

BASE_DIR = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def daphne_url(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with mcp_daphne(django_db_blocker) as url:
        yield url


@pytest.fixture
def live_graph(transactional_db: None) -> SmallGraph:
    return build_small_graph()


@pytest.fixture
def token(live_graph: SmallGraph) -> str:
    user = make_user()
    add_member(live_graph.project, user)
    return make_token(user, live_graph.project)


def http_client(url: str, headers: dict[str, str]) -> Client:
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=60)))


def payload(result: Any) -> dict[str, Any]:
    assert result.is_error is False, result.content
    data: dict[str, Any] = json.loads(result.content[0].text)
    assert result.structured_content == data
    return data


async def test_http_lists_the_registry_tools_with_their_schemas(daphne_url: str, token: str):
    async with http_client(daphne_url, {"Authorization": f"Bearer {token}"}) as client:
        listed = await client.list_tools()

    assert [t.name for t in listed.tools] == tool_names()
    traverse = next(t for t in listed.tools if t.name == "traverse_graph")
    assert traverse.input_schema == tool_get("traverse_graph").input_schema()
    assert traverse.annotations is not None and traverse.annotations.read_only_hint is True


async def test_http_hybrid_search_runs_on_the_tokens_project(
    daphne_url: str, token: str, live_graph: SmallGraph
):
    async with http_client(daphne_url, {"Authorization": f"Bearer {token}"}) as client:
        result = await client.call_tool("hybrid_search", {"query": "Alice", "limit": 3})

    results = payload(result)["results"]
    assert results[0]["key"] == "alice"
    assert results[0]["id"] == str(live_graph.e["alice"].id)


async def test_http_a_similarity_search_says_how_many_entities_wait_for_a_vector(
    daphne_url: str, token: str, live_graph: SmallGraph
):
    await sync_to_async(make_entity)(live_graph.project, "zoe", type="Person", name="Zoe Grey")

    async with http_client(daphne_url, {"Authorization": f"Bearer {token}"}) as client:
        result = await client.call_tool("find_similar", {"entity_id": "alice", "limit": 3})

    assert payload(result)["embedding"] == {"pending": 1}
    assert len(payload(result)["results"]) == 3


async def test_http_bad_arguments_and_unknown_entity_are_is_error_results(daphne_url: str, token: str):
    async with http_client(daphne_url, {"Authorization": f"Bearer {token}"}) as client:
        bad = await client.call_tool("traverse_graph", {"start_entity_id": "alice", "max_depth": 9})
        missing = await client.call_tool("get_entity_edges", {"entity_id": "nobody"})
        after = await client.call_tool("list_entity_types", {})

    assert bad.is_error is True
    assert "max_depth" in bad.content[0].text
    assert missing.is_error is True
    assert "not found" in missing.content[0].text
    assert payload(after)["types"][0] == {"type": "Person", "count": 5}


async def test_http_lists_query_paths_with_the_tokens_project_types_and_runs_it(daphne_url: str, token: str):
    async with http_client(daphne_url, {"Authorization": f"Bearer {token}"}) as client:
        listed = await client.list_tools()
        result = await client.call_tool(
            "query_paths", {"start": ["Carol White"], "hops": [{"relationship": "KNOWS", "direction": "out"}]}
        )
        unknown = await client.call_tool(
            "query_paths", {"start": ["Carol White"], "hops": [{"type": "Planet"}]}
        )

    query_paths = next(t for t in listed.tools if t.name == "query_paths")
    hop_type = query_paths.input_schema["$defs"]["Hop"]["properties"]["type"]
    assert next(b for b in hop_type["anyOf"] if b.get("type") == "string")["enum"] == [
        "City",
        "Company",
        "Person",
    ]
    assert [r["key"] for r in payload(result)["results"]] == ["alice", "dave"]
    assert unknown.is_error is True
    assert unknown.structured_content["code"] == "invalid_arguments"
    assert "hops.0.type" in unknown.content[0].text


async def test_http_without_a_valid_token_is_refused_with_401(daphne_url: str, token: str):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    async with httpx.AsyncClient(timeout=30) as raw:
        no_token = await raw.post(daphne_url, json=init)
        bad_token = await raw.post(daphne_url, json=init, headers={"Authorization": "Bearer kgc_wrong"})

    assert no_token.status_code == 401
    assert no_token.json()["code"] == "unauthorized"
    assert no_token.headers["www-authenticate"] == "Bearer"
    assert bad_token.status_code == 401
    with pytest.raises(Exception):  # noqa: B017 - the client surfaces the 401 as its own error type
        async with http_client(daphne_url, {}) as client:
            await client.list_tools()


@pytest.fixture
def member_tokens(live_graph: SmallGraph) -> tuple[str, str]:
    """A token not bound to a project, and one bound to another project, of a member of project A."""
    user = make_user()
    add_member(live_graph.project, user)
    return make_token(user), make_token(user, make_project(owner=user))


async def test_http_x_project_id_selects_a_project_of_the_tokens_user(
    daphne_url: str, live_graph: SmallGraph, member_tokens: tuple[str, str]
):
    unbound, bound_elsewhere = member_tokens

    async with http_client(
        daphne_url, {"Authorization": f"Bearer {unbound}", "X-Project-ID": live_graph.project.slug}
    ) as client:
        types = payload(await client.call_tool("list_entity_types", {}))["types"]
    async with httpx.AsyncClient(timeout=30) as raw:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        foreign = await raw.post(
            daphne_url,
            json=init,
            headers={"Authorization": f"Bearer {unbound}", "X-Project-ID": str(live_graph.other.id)},
        )
        other_than_bound = await raw.post(
            daphne_url,
            json=init,
            headers={
                "Authorization": f"Bearer {bound_elsewhere}",
                "X-Project-ID": str(live_graph.project.id),
            },
        )
        no_project = await raw.post(daphne_url, json=init, headers={"Authorization": f"Bearer {unbound}"})

    assert types[0] == {"type": "Person", "count": 5}
    assert foreign.status_code == 404
    assert other_than_bound.status_code == 404
    assert no_project.status_code == 400
    assert no_project.json()["code"] == "project_required"


async def test_stdio_command_serves_the_projects_tools(live_graph: SmallGraph):
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp_server", "--project", live_graph.project.slug],
        env=child_env(),
        cwd=BASE_DIR,
    )

    async with Client(params) as client:
        listed = await client.list_tools()
        edges = await client.call_tool("get_entity_edges", {"entity_id": "alice", "direction": "in"})
        bad = await client.call_tool("hybrid_search", {"query": ""})
        write = await client.call_tool("delete_entity", {"entity_id": "alice"})

    assert sorted(t.name for t in listed.tools) == sorted(tool_names())
    assert [e["other"]["key"] for e in payload(edges)["edges"]] == ["carol"]
    assert bad.is_error is True
    assert "query" in bad.content[0].text
    assert write.is_error is True
    assert "needs approval" in write.content[0].text
    assert await sync_to_async(GraphObject.objects.filter(id=live_graph.e["alice"].id).exists)()


# --- issue #15: write tools over MCP: annotations, the token's role, approval required ------------


async def test_http_write_tools_are_annotated_not_read_only_and_deletes_and_updates_destructive(
    daphne_url: str, token: str
):
    async with http_client(daphne_url, {"Authorization": f"Bearer {token}"}) as client:
        listed = {t.name: t.annotations for t in (await client.list_tools()).tools}

    hints = {name: (a.read_only_hint, a.destructive_hint) for name, a in listed.items() if a is not None}
    assert hints["create_entity"] == (False, False)
    assert hints["create_relationship"] == (False, False)
    assert hints["update_entity"] == (False, True)
    assert hints["delete_entity"] == (False, True)
    assert hints["delete_relationship"] == (False, True)
    assert hints["update_relationship"] == (False, True)
    assert hints["hybrid_search"][0] is True


async def test_http_write_by_a_viewer_token_is_refused_for_its_role(daphne_url: str, token: str, live_graph):
    async with http_client(daphne_url, {"Authorization": f"Bearer {token}"}) as client:
        refused = await client.call_tool("delete_entity", {"entity_id": "alice"})

    assert refused.is_error is True
    assert "editor role" in refused.content[0].text
    assert await sync_to_async(GraphObject.objects.filter(id=live_graph.e["alice"].id).exists)()


async def test_http_write_by_an_editor_token_says_approval_is_required_and_writes_nothing(
    daphne_url: str, live_graph: SmallGraph
):
    editor = await sync_to_async(make_user)()
    await sync_to_async(add_member)(live_graph.project, editor, "editor")
    secret = await sync_to_async(make_token)(editor, live_graph.project)

    async with http_client(daphne_url, {"Authorization": f"Bearer {secret}"}) as client:
        refused = await client.call_tool("create_entity", {"key": "zed", "type": "Person", "name": "Zed"})
        version = payload(await client.call_tool("schema_version", {}))["graph_version"]

    assert refused.is_error is True
    assert "needs approval" in refused.content[0].text
    assert not await sync_to_async(GraphObject.objects.filter(key="zed").exists)()
    assert version == 0


# --- issue #11: bad input in tools/call is an isError result (or a JSON-RPC error), never a crash --


async def test_http_nul_in_tool_arguments_is_an_is_error_result_naming_the_argument(
    daphne_url: str, token: str
):
    async with http_client(daphne_url, {"Authorization": f"Bearer {token}"}) as client:
        bad = await client.call_tool("hybrid_search", {"query": "Alice\x00"})
        nested = await client.call_tool("query_entities", {"properties": {"a": {"b": ["\x00"]}}})
        after = await client.call_tool("list_entity_types", {})

    assert bad.is_error is True
    assert "query" in bad.content[0].text and "NUL" in bad.content[0].text
    assert nested.is_error is True
    assert "properties.a.b.0" in nested.content[0].text
    assert payload(after)["types"][0] == {"type": "Person", "count": 5}


def raw_tools_call(arguments_json: str) -> str:
    return (
        '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", '
        f'"params": {{"name": "query_entities", "arguments": {arguments_json}}}}}'
    )


@pytest.mark.parametrize(
    "arguments_json",
    ['{"type": "Person\\ud800"}', '{"properties": {"a": ' + "[" * 10_000 + "]" * 10_000 + "}}"],
    ids=["lone-surrogate", "nested-10000-deep"],
)
async def test_http_lone_surrogate_or_deep_nesting_in_tools_call_is_a_parse_error_not_500(
    daphne_url: str, token: str, arguments_json: str
):
    """The MCP SDK parses the JSON-RPC body itself and refuses both before a tool runs."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }

    async with httpx.AsyncClient(timeout=30) as raw:
        response = await raw.post(daphne_url, content=raw_tools_call(arguments_json), headers=headers)
    async with http_client(daphne_url, {"Authorization": f"Bearer {token}"}) as client:
        after = await client.call_tool("list_entity_types", {})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700
    assert payload(after)["types"][0] == {"type": "Person", "count": 5}


def test_x_project_id_with_a_nul_is_a_400_naming_the_header_not_a_500(member_tokens: tuple[str, str]):
    """HTTP clients cannot send a NUL in a header; a proxy or a raw socket can, so the service checks it."""
    unbound, _ = member_tokens

    with pytest.raises(ServiceError) as refused:
        mcp_project_resolve(authorization_secret=unbound, project_ref="demo\x00")

    assert refused.value.status == 400
    assert refused.value.code == "invalid_request"
    assert "X-Project-ID" in refused.value.message


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_http_a_body_over_the_limit_is_a_413_and_the_server_goes_on(
    daphne_url: str, token: str, chunked: bool
):
    """The MCP SDK reads a body whole with no limit of its own: kgchat stops reading at
    ``KGCHAT_MCP_MAX_BYTES`` (1 MiB by default), whether the size is announced or the body comes
    in chunks."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }
    big = raw_tools_call('{"query": "' + "x" * (1024 * 1024) + '"}').encode()

    async def chunks():
        for at in range(0, len(big), 65536):
            yield big[at : at + 65536]

    async with httpx.AsyncClient(timeout=30) as raw:
        response = await raw.post(daphne_url, content=chunks() if chunked else big, headers=headers)
    async with http_client(daphne_url, {"Authorization": f"Bearer {token}"}) as client:
        after = await client.call_tool("list_entity_types", {})

    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert "KGCHAT_MCP_MAX_BYTES" in response.json()["error"]
    assert payload(after)["types"][0] == {"type": "Person", "count": 5}

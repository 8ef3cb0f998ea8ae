"""Issue #11 part 3, at connect time: agents' MCP connections go only where the operator allows.

The URL is checked again when a turn connects (DNS can change), the connection goes to the
address that check approved, redirects never lead out of the allowlist, and an entry that is
not allowed (a legacy command, a stdio name no longer configured) is never run.
"""

from __future__ import annotations

import ipaddress
import os
import re

import httpx2
import pytest

from apps.agents import mcp_servers
from apps.agents.adk.mcp_http import McpUrlRefused, guarded_client_factory
from apps.agents.adk.tools import mcp_toolsets
from tests.support.mcp_servers import echo_server, echo_stdio_config, trap


@pytest.fixture
def resolver(monkeypatch):
    """The guard's DNS lookup, answered from a table (no network); records what was asked."""
    table: dict[str, list[str]] = {}
    asked: list[str] = []

    def resolve(host, port):
        asked.append(host)
        return [ipaddress.ip_address(a) for a in table[host]]

    monkeypatch.setattr(mcp_servers, "resolve", resolve)
    return table, asked


async def tool_names(entry):
    toolsets = mcp_toolsets([entry])
    try:
        return [t.name for ts in toolsets for t in await ts.get_tools()]
    finally:
        for ts in toolsets:
            await ts.close()


async def test_allowlisted_url_still_works_with_operator_headers(settings):
    with echo_server("http", "--token", "operator-secret") as port:
        settings.KGCHAT_MCP_URL_ALLOWLIST = [f"127.0.0.1:{port}"]
        url = f"http://127.0.0.1:{port}/mcp"

        with_token = await tool_names({"url": url, "headers": {"Authorization": "Bearer operator-secret"}})
        without = await tool_names({"url": url})

    assert with_token == ["shout"]
    assert without == []


async def test_allowlisted_stdio_server_by_name_still_works(settings):
    settings.KGCHAT_MCP_STDIO_SERVERS = {"echo": echo_stdio_config()}

    names = await tool_names({"stdio": "echo"})

    assert names == ["shout"]


async def test_legacy_command_entry_is_never_spawned(tmp_path):
    marker = tmp_path / "owned"

    names = await tool_names({"command": "touch", "args": [str(marker)]})

    assert names == []
    assert not marker.exists()


async def test_stdio_name_no_longer_configured_is_skipped(settings):
    settings.KGCHAT_MCP_STDIO_SERVERS = {}

    assert mcp_toolsets([{"stdio": "echo"}]) == []


async def test_url_removed_from_allowlist_is_skipped(settings):
    settings.KGCHAT_MCP_URL_ALLOWLIST = []

    assert mcp_toolsets([{"url": "http://127.0.0.1:9/mcp"}]) == []


async def test_redirect_from_allowed_host_to_disallowed_one_is_not_followed(settings):
    async with trap() as target:
        with echo_server("redirect", "--to", f"http://127.0.0.1:{target.port}/mcp") as port:
            settings.KGCHAT_MCP_URL_ALLOWLIST = [f"127.0.0.1:{port}"]

            names = await tool_names({"url": f"http://127.0.0.1:{port}/mcp"})

    assert names == []
    assert target.connections == 0


async def test_guarded_client_rechecks_every_redirect_hop(settings):
    async with trap() as target:
        with echo_server("redirect", "--to", f"http://127.0.0.1:{target.port}/mcp") as port:
            settings.KGCHAT_MCP_URL_ALLOWLIST = [f"127.0.0.1:{port}"]
            async with guarded_client_factory() as client:
                with pytest.raises(McpUrlRefused, match=re.escape(f"127.0.0.1:{target.port} is not in")):
                    # Even a caller that asks to follow redirects cannot leave the allowlist.
                    await client.get(f"http://127.0.0.1:{port}/mcp", follow_redirects=True)

    assert target.connections == 0


async def test_dns_is_checked_again_at_connect_time(settings, resolver):
    settings.KGCHAT_MCP_URL_ALLOWLIST = ["mcp.example.com"]
    table, _ = resolver
    table["mcp.example.com"] = ["93.184.216.34"]
    mcp_servers.url_check("https://mcp.example.com/mcp")  # as when the definition was saved
    table["mcp.example.com"] = ["10.0.0.5"]  # rebinding to the host network afterwards

    async with guarded_client_factory() as client:
        with pytest.raises(McpUrlRefused, match=r"resolves to 10\.0\.0\.5"):
            await client.get("https://mcp.example.com/mcp")


@pytest.mark.parametrize(
    "url",
    ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1:5432/", "http://[::1]:5432/"],
)
async def test_guarded_client_refuses_what_the_allowlist_does_not_name(settings, url):
    settings.KGCHAT_MCP_URL_ALLOWLIST = ["mcp.example.com"]

    async with guarded_client_factory() as client:
        with pytest.raises(McpUrlRefused, match="not in the operator's MCP allowlist"):
            await client.get(url)


async def test_connection_goes_to_the_address_resolved_once(settings, resolver):
    table, asked = resolver
    table["localhost"] = ["127.0.0.1"]
    with echo_server("http") as port:
        settings.KGCHAT_MCP_URL_ALLOWLIST = [f"localhost:{port}"]

        names = await tool_names({"url": f"http://localhost:{port}/mcp"})

    assert names == ["shout"]
    # initialize, initialized and tools/list went to the one address looked up for the toolset.
    assert asked == ["localhost"]


async def test_an_unreachable_address_of_the_host_falls_back_to_its_next_checked_one(settings, resolver):
    table, asked = resolver
    table["localhost"] = ["::1", "127.0.0.1"]  # the echo server listens on IPv4 only
    with echo_server("http") as port:
        settings.KGCHAT_MCP_URL_ALLOWLIST = [f"localhost:{port}"]

        names = await tool_names({"url": f"http://localhost:{port}/mcp"})

    assert names == ["shout"]
    assert asked == ["localhost"]


async def test_pinned_request_keeps_the_host_header_and_sni(settings, resolver):
    table, _ = resolver
    table["mcp.example.com"] = ["93.184.216.34"]
    settings.KGCHAT_MCP_URL_ALLOWLIST = ["mcp.example.com"]
    seen: list[httpx2.Request] = []

    async def record(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json={})

    from apps.agents.adk.mcp_http import PinnedTransport

    transport = PinnedTransport(inner=httpx2.MockTransport(record))
    async with httpx2.AsyncClient(transport=transport) as client:
        await client.get("https://mcp.example.com/mcp")

    (request,) = seen
    assert request.url.host == "93.184.216.34"
    assert request.headers["host"] == "mcp.example.com"
    assert request.extensions["sni_hostname"] == "mcp.example.com"


async def test_adk_cannot_swap_in_its_own_unguarded_client(settings, monkeypatch):
    monkeypatch.setitem(os.environ, "GOOGLE_API_USE_CLIENT_CERTIFICATE", "true")
    settings.KGCHAT_MCP_URL_ALLOWLIST = ["127.0.0.1:9"]
    (toolset,) = mcp_toolsets([{"url": "http://127.0.0.1:9/mcp"}])

    transport = await toolset._mcp_session_manager._get_mtls_transport()

    assert transport is None

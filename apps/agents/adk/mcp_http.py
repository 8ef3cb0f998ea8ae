"""The HTTP client of agents' MCP toolsets: every request re-checked, every connection pinned.

ADK's ``StreamableHTTPConnectionParams`` / ``SseConnectionParams`` take an ``httpx_client_factory``;
the MCP SDK (2.x) builds on ``httpx2``. ``guarded_client_factory`` gives them a client whose
transport, for each request (every redirect hop included, should anything follow one):

1. checks the URL against ``KGCHAT_MCP_URL_ALLOWLIST`` and the address rules
   (``apps.agents.mcp_servers.url_check``), resolving the host once per client and host;
2. connects to an address that check approved (the first that accepts a connection, then that
   one only), never to a second DNS answer, while the ``Host`` header and the TLS server name
   (SNI, certificate check) stay the URL's host.

Redirects are not followed by the client (the SDK follows same-origin ones itself; each such
request passes step 1 again). A refused request fails like an unreachable server: the toolset
offers no tools and the run goes on.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2

from apps.agents.mcp_servers import InvalidMcpServer, url_check

DEFAULT_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


class McpUrlRefused(httpx2.ConnectError):
    """A request of an MCP client to a URL the operator's rules do not allow."""


class PinnedTransport(httpx2.AsyncBaseTransport):
    """Sends each request to the address ``url_check`` approved for its host, after checking it."""

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self._inner = inner or httpx2.AsyncHTTPTransport(trust_env=False)
        self._pinned: dict[tuple[str, str, int], str] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        try:
            if key in self._pinned:
                url_check(str(url), resolve_dns=False)
                candidates = [self._pinned[key]]
            else:
                target = await asyncio.to_thread(url_check, str(url))
                candidates = [str(a) for a in target.addresses]
        except InvalidMcpServer as exc:
            raise McpUrlRefused(f"MCP request refused: {exc.message}", request=request) from None
        failure: httpx2.ConnectError | None = None
        for address in candidates:
            if address != url.host:
                request.extensions = {**request.extensions, "sni_hostname": url.host}
                request.url = url.copy_with(host=address)
            try:
                response = await self._inner.handle_async_request(request)
            except httpx2.ConnectError as exc:  # that address is unreachable: try the host's next one
                failure = exc
                continue
            self._pinned[key] = address
            return response
        assert failure is not None
        raise failure

    async def aclose(self) -> None:
        await self._inner.aclose()


def guarded_client_factory(
    headers: dict[str, str] | None = None,
    timeout: Any = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` for one MCP connection: pinned, checked, no redirects, no env proxies."""
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout if timeout is not None else DEFAULT_TIMEOUT,
        auth=auth,
        transport=PinnedTransport(),
        follow_redirects=False,
        trust_env=False,
    )

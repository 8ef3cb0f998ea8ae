"""The MCP servers an agent definition may use: a typed spec, and the operator's allowlists.

An entry of ``AgentDefinition.mcp_servers`` is one of

- ``{"stdio": "<name>", "tool_filter"?: [...]}``: a stdio server the operator configured under that
  name in ``KGCHAT_MCP_STDIO_SERVERS`` (command, args, env). A definition never carries a command,
  arguments or environment of its own: nothing a user types reaches a process.
- ``{"url": "https://…", "name"?, "transport"?: "streamable_http" | "sse", "tool_filter"?,
  "headers"?}``: an HTTP server whose host (and port) is in ``KGCHAT_MCP_URL_ALLOWLIST``. https is
  required, except for a loopback host the allowlist names explicitly; a host whose addresses are
  not public (private, link-local, unique-local, loopback, CGNAT, multicast, unspecified,
  reserved, cloud metadata) is refused, unless it is that explicitly allowlisted loopback host.
  ``headers`` (credentials) are set by operators only and never shown by the REST API.

URLs are checked when a definition is saved and again, with a fresh DNS lookup, when a turn
connects (``apps.agents.adk.mcp_http`` pins the connection to the address checked here).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from apps.core.errors import ServiceError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Named because a reader should see that they are covered; all are also non-public ranges.
CLOUD_METADATA = {
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, DigitalOcean …
    ipaddress.ip_address("169.254.170.2"),  # AWS ECS task metadata
    ipaddress.ip_address("fd00:ec2::254"),  # AWS IPv6
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
}
CGNAT = ipaddress.ip_network("100.64.0.0/10")
LOOPBACK_NAMES = {"localhost"}
LEGACY_PROCESS_KEYS = ("command", "args", "env", "cwd")


class InvalidMcpServer(ServiceError):
    """invalid MCP server"""

    code = "invalid_agent_definition"


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StdioServerRef(_Spec):
    """A stdio server, by the name the operator gave it in ``KGCHAT_MCP_STDIO_SERVERS``."""

    stdio: str = Field(min_length=1, max_length=100)
    tool_filter: list[str] | None = None


class HttpServerSpec(_Spec):
    """An HTTP MCP server (streamable HTTP, or the older SSE transport) on an allowlisted host."""

    url: str = Field(min_length=1, max_length=2000)
    name: str | None = Field(default=None, max_length=100)
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    tool_filter: list[str] | None = None
    headers: dict[str, str] | None = None


McpServerSpec = StdioServerRef | HttpServerSpec


class StdioServerConfig(_Spec):
    """What an operator configures for one stdio server name."""

    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None


# --- URLs --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AllowEntry:
    host: str
    port: int | None

    @property
    def loopback(self) -> bool:
        return is_loopback_host(self.host)


@dataclass(frozen=True)
class UrlTarget:
    """A checked URL: where to connect (``addresses``, all allowed) and what to call the host."""

    scheme: str
    host: str
    port: int
    addresses: tuple[IPAddress, ...]


def _ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def is_loopback_host(host: str) -> bool:
    ip = _ip(host)
    return ip.is_loopback if ip is not None else host in LOOPBACK_NAMES


def parse_allowlist(entries: list[str] | tuple[str, ...]) -> list[AllowEntry]:
    """``host``, ``host:port``, ``[v6]``, ``[v6]:port`` or a bare IPv6 address; case-insensitive."""
    parsed = []
    for raw in entries:
        entry = raw.strip().lower()
        if not entry:
            continue
        port: str | None = None
        if entry.startswith("["):
            host, _, rest = entry[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else None
        elif entry.count(":") == 1:
            host, port = entry.split(":")
        else:
            host = entry
        if port is not None and not port.isdigit():
            continue  # malformed: allows nothing (the system check reports it)
        parsed.append(AllowEntry(host=host.rstrip("."), port=int(port) if port else None))
    return parsed


def _allow_entry(host: str, port: int, default_port: int) -> AllowEntry | None:
    for entry in parse_allowlist(settings.KGCHAT_MCP_URL_ALLOWLIST):
        if entry.host == host and (entry.port or default_port) == port:
            return entry
    return None


def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses ``host`` resolves to (the guard's one DNS lookup; tests replace it)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(info[4][0]) for info in infos]


def _embedded_ipv4(ip: IPAddress) -> IPAddress:
    """The IPv4 address inside an IPv4-mapped, 6to4 or NAT64 IPv6 address (else ``ip`` itself)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in ipaddress.ip_network("64:ff9b::/96"):
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def address_problem(ip: IPAddress) -> str | None:
    """Why an MCP server must not be reached at ``ip`` (None: a public address)."""
    inner = _embedded_ipv4(ip)
    for candidate in dict.fromkeys((ip, inner)):
        if candidate in CLOUD_METADATA:
            return "a cloud metadata address"
        for label, test in (
            ("an unspecified", candidate.is_unspecified),
            ("a loopback", candidate.is_loopback),
            ("a link-local", candidate.is_link_local),
            ("a multicast", candidate.is_multicast),
            ("a shared (CGNAT)", candidate in CGNAT),
            ("a private", candidate.is_private),
            ("a reserved", candidate.is_reserved),
            ("a non-public", not candidate.is_global),
        ):
            if test:
                return f"{label} address"
    return None


def _resolved(host: str, port: int) -> list[IPAddress]:
    try:
        addresses = resolve(host, port)
    except OSError as exc:
        raise InvalidMcpServer(f"host {host} does not resolve ({exc})") from None
    if not addresses:
        raise InvalidMcpServer(f"host {host} does not resolve")
    return addresses


def _address_check(ip: IPAddress, *, host: str, loopback: bool, literal: bool) -> None:
    """``InvalidMcpServer`` for an address the allowlist entry does not allow."""
    if loopback:
        if not _embedded_ipv4(ip).is_loopback:
            raise InvalidMcpServer(f"allowlisted loopback host {host} resolves to {ip}, not loopback")
        return
    problem = address_problem(ip)
    if problem is not None:
        where = f"{ip}" if literal else f"{host} resolves to {ip}"
        raise InvalidMcpServer(f"{where}: {problem}; MCP servers must be on public addresses")


def url_check(url: str, *, resolve_dns: bool = True) -> UrlTarget:
    """Check ``url`` against the operator's allowlist and the address rules; raise ``InvalidMcpServer``.

    With ``resolve_dns`` the host is looked up once and every address it has must be allowed; the
    caller connects to one of ``addresses``, never to a second lookup's answer.
    """
    try:
        parts = urlsplit(url)
        port_given = parts.port
    except ValueError as exc:
        raise InvalidMcpServer(f"url {url!r} is not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in {"http", "https"}:
        raise InvalidMcpServer(f"url must be http(s), not {scheme or 'schemeless'}: {url!r}")
    if parts.username is not None or parts.password is not None:
        raise InvalidMcpServer("url must not carry credentials (user:password@); an operator sets headers")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise InvalidMcpServer(f"url has no host: {url!r}")
    default_port = 443 if scheme == "https" else 80
    port = port_given or default_port
    entry = _allow_entry(host, port, default_port)
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if entry is None:
        raise InvalidMcpServer(
            f"host {shown} is not in the operator's MCP allowlist (KGCHAT_MCP_URL_ALLOWLIST)"
        )
    if scheme != "https" and not entry.loopback:
        raise InvalidMcpServer(
            f"url must use https (plain http only for a loopback host the allowlist names): {shown}"
        )
    literal = _ip(host)
    addresses = [literal] if literal is not None else _resolved(host, port) if resolve_dns else []
    for ip in dict.fromkeys(addresses):
        _address_check(ip, host=host, loopback=entry.loopback, literal=literal is not None)
    return UrlTarget(scheme=scheme, host=host, port=port, addresses=tuple(dict.fromkeys(addresses)))


# --- stdio -------------------------------------------------------------------------------------


def stdio_servers() -> dict[str, StdioServerConfig]:
    """The operator's stdio servers (``KGCHAT_MCP_STDIO_SERVERS``), checked."""
    configured = settings.KGCHAT_MCP_STDIO_SERVERS or {}
    if not isinstance(configured, dict):
        raise InvalidMcpServer("KGCHAT_MCP_STDIO_SERVERS is misconfigured: it must be an object of names")
    try:
        return {str(name): StdioServerConfig.model_validate(spec) for name, spec in configured.items()}
    except ValidationError as exc:
        raise InvalidMcpServer(f"KGCHAT_MCP_STDIO_SERVERS is misconfigured: {_first_error(exc)}") from None


def stdio_server_get(name: str) -> StdioServerConfig:
    servers = stdio_servers()
    if name not in servers:
        known = ", ".join(sorted(servers)) or "none are configured"
        raise InvalidMcpServer(
            f"no stdio MCP server named {name!r} in KGCHAT_MCP_STDIO_SERVERS (allowlisted: {known})"
        )
    return servers[name]


# --- whole lists -------------------------------------------------------------------------------


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else str(err["msg"])


def mcp_server_parse(raw: object) -> McpServerSpec:
    """One entry as its spec; ``InvalidMcpServer`` names what is wrong (no checks of settings)."""
    if not isinstance(raw, dict):
        raise InvalidMcpServer('must be an object: {"stdio": "<name>"} or {"url": "https://…"}')
    process_keys = [k for k in LEGACY_PROCESS_KEYS if k in raw]
    if process_keys:
        raise InvalidMcpServer(
            f"must not carry {', '.join(process_keys)}: a definition names an operator-allowlisted "
            'stdio server instead ({"stdio": "<name>"}, see KGCHAT_MCP_STDIO_SERVERS)'
        )
    if "stdio" in raw and "url" in raw:
        raise InvalidMcpServer('has both "stdio" and "url"; give one')
    model: type[StdioServerRef] | type[HttpServerSpec]
    if "stdio" in raw:
        model = StdioServerRef
    elif "url" in raw:
        model = HttpServerSpec
    else:
        raise InvalidMcpServer('needs "stdio" (an allowlisted server name) or "url"')
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise InvalidMcpServer(_first_error(exc)) from None


def mcp_server_check(spec: McpServerSpec, *, resolve_dns: bool = True) -> None:
    """Check one entry against the operator's settings (stdio name, URL allowlist and addresses)."""
    if isinstance(spec, StdioServerRef):
        stdio_server_get(spec.stdio)
    else:
        url_check(spec.url, resolve_dns=resolve_dns)


def mcp_servers_validate(
    raw: object, *, headers_allowed: bool, resolve_dns: bool = True
) -> list[dict[str, Any]]:
    """Validate a whole ``mcp_servers`` value; return it as stored. Errors name the entry (``[i]``).

    ``headers_allowed`` is for operators (the admin): users of the REST API cannot set headers.
    """
    if not isinstance(raw, list):
        raise InvalidMcpServer("mcp_servers must be a list")
    out = []
    for i, item in enumerate(raw):
        try:
            spec = mcp_server_parse(item)
            if isinstance(spec, HttpServerSpec) and spec.headers and not headers_allowed:
                raise InvalidMcpServer("headers can only be set by an operator (in the admin)")
            mcp_server_check(spec, resolve_dns=resolve_dns)
        except InvalidMcpServer as exc:
            raise InvalidMcpServer(f"mcp_servers[{i}]: {exc.message}") from None
        out.append(spec.model_dump(exclude_none=True))
    return out


def mcp_servers_problem(raw: object) -> str | None:
    """Why a stored ``mcp_servers`` value may not run (None: fine). No DNS: for migrations and admin lists."""
    try:
        mcp_servers_validate(raw, headers_allowed=True, resolve_dns=False)
    except InvalidMcpServer as exc:
        return exc.message
    return None


def mcp_servers_public(raw: object) -> list[dict[str, Any]]:
    """What the REST API shows of ``mcp_servers``: names, URLs, transports, filters; never headers.

    An entry that does not parse (a legacy command) is shown as ``{"invalid": true}`` only.
    """
    shown: list[dict[str, Any]] = []
    for item in raw if isinstance(raw, list) else []:
        try:
            spec = mcp_server_parse(item)
        except InvalidMcpServer:
            shown.append({"invalid": True})
            continue
        shown.append(spec.model_dump(exclude_none=True, exclude={"headers"}))
    return shown

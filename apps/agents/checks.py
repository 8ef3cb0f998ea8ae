"""System checks of the operator's MCP settings (``manage.py check`` and every server start)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register

from apps.agents.mcp_servers import InvalidMcpServer, parse_allowlist, stdio_servers


@register(Tags.security)
def mcp_settings_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report a misconfigured ``KGCHAT_MCP_STDIO_SERVERS`` or ``KGCHAT_MCP_URL_ALLOWLIST`` entry."""
    found: list[CheckMessage] = []
    try:
        stdio_servers()
    except InvalidMcpServer as exc:
        found.append(Error(exc.message, id="kgchat.E101"))
    entries = [e for e in settings.KGCHAT_MCP_URL_ALLOWLIST if e.strip()]
    for entry in entries:
        if not parse_allowlist([entry]):
            found.append(
                Error(
                    f"KGCHAT_MCP_URL_ALLOWLIST entry {entry!r} is malformed (host, host:port or [v6]:port)",
                    id="kgchat.E102",
                )
            )
    return found


@register()
def turn_lease_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report turn lease settings under which a live turn could be taken for dead, or a dead one
    never resumed: the lease is renewed every third of ``KGCHAT_TURN_LEASE_SECONDS`` (under 3 s a
    slow renewal lets it lapse while its process lives), it must lapse well within the turn timeout
    (after which an abandoned claim is free for a new message), and a turn needs one attempt at least."""
    lease = settings.KGCHAT_TURN_LEASE_SECONDS
    timeout = settings.KGCHAT_TURN_TIMEOUT_SECONDS
    found: list[CheckMessage] = []
    if lease < 3 or lease * 2 > timeout:
        found.append(
            Error(
                f"KGCHAT_TURN_LEASE_SECONDS ({lease}) must be at least 3 and at most half of "
                f"KGCHAT_TURN_TIMEOUT_SECONDS ({timeout}): a running turn's lease is renewed every "
                "third of it, and a turn whose lease lapsed is resumed before its claim counts as abandoned",
                id="kgchat.E103",
            )
        )
    if settings.KGCHAT_TURN_MAX_ATTEMPTS < 1:
        found.append(Error("KGCHAT_TURN_MAX_ATTEMPTS must be 1 or more", id="kgchat.E104"))
    return found

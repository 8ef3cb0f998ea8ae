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
def stale_claim_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report a turn timeout that reaches the stale-claim time: a turn still running would then
    count as abandoned, and another process could claim its conversation and mark it interrupted."""
    from apps.agents.services import STALE_AFTER

    timeout = settings.KGCHAT_TURN_TIMEOUT_SECONDS
    if timeout >= STALE_AFTER.total_seconds():
        return [
            Error(
                f"KGCHAT_TURN_TIMEOUT_SECONDS ({timeout}) must be shorter than the time after which a "
                f"running turn's claim counts as stale ({int(STALE_AFTER.total_seconds())} s)",
                id="kgchat.E103",
            )
        ]
    return []

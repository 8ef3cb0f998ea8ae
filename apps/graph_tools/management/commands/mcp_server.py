"""Serve one project's graph tools over MCP stdio: ``python manage.py mcp_server --project <slug-or-id>``."""

from __future__ import annotations

from typing import Any

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.graph_tools.mcp_server import mcp_stdio_serve
from apps.projects.selectors import ProjectNotFound


class Command(BaseCommand):
    help = "Serve the graph tools of one project as an MCP server over stdin/stdout."
    # An MCP client starts it for each session: the system checks (which import the URLconf and the
    # agent stack, ~4 s of CPU) would delay every client's start; `migrate` runs them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="The project's slug or id.")

    def handle(self, *args: Any, **options: Any) -> None:
        # stdout carries the protocol: nothing else may be written to it.
        try:
            anyio.run(lambda: mcp_stdio_serve(project_ref=options["project"]))
        except ProjectNotFound as exc:
            raise CommandError(exc.message) from None

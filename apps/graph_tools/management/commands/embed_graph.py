"""Embed a project's entities: ``python manage.py embed_graph --project <slug-or-id> [--all|--missing]``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.graph_tools.management.progress import progress_bar
from apps.graph_tools.services import graph_embed_as_operator
from apps.projects.selectors import ProjectNotFound


class Command(BaseCommand):
    help = "Compute embeddings of a project's entities with the configured model (KGCHAT_EMBEDDINGS)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="The project's slug or id.")
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--all", action="store_true", help="Re-embed every entity.")
        which.add_argument(
            "--missing", action="store_true", help="Only entities without a vector of this model (default)."
        )
        parser.add_argument("--batch-size", type=int, default=32)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            done = graph_embed_as_operator(
                project_ref=options["project"],
                only_missing=not options["all"],
                batch_size=options["batch_size"],
                progress=progress_bar(self.stderr),
            )
        except ProjectNotFound as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"embedded {done.count} entities of {done.project.slug} with {done.model}")

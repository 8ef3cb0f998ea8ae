from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.errors import ServiceError
from apps.graph_tools.services import graph_import_as_operator


class Command(BaseCommand):
    help = "Import a JSON Lines graph file (PROTOCOL §5b) into a project: upsert by key, all or nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--project", required=True, help="project slug or id")

    def handle(self, *args: object, file: Path, project: str, **options: object) -> None:
        try:
            with file.open("rb") as fh:
                done = graph_import_as_operator(project_ref=project, lines=fh)
        except (OSError, ServiceError) as exc:
            raise CommandError(str(exc)) from exc
        counts = ", ".join(f"{k}={v}" for k, v in done.result.as_counts().items())
        if done.result.embedding is not None and done.result.embedding.pending:
            counts += (
                f"; {done.result.embedding.pending} entities wait for the embedding worker"
                f" (make run starts it; or: manage.py embed_graph --project {project})"
            )
        self.stdout.write(f"imported into {project}: {counts}")

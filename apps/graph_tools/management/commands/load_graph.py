from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.graph_tools.importer import graph_import
from apps.projects.errors import ServiceError
from apps.projects.selectors import project_get_by_ref


class Command(BaseCommand):
    help = "Import a JSON Lines graph file (PROTOCOL §5b) into a project: upsert by key, all or nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--project", required=True, help="project slug or id")

    def handle(self, *args: object, file: Path, project: str, **options: object) -> None:
        try:
            with file.open("rb") as fh:
                result = graph_import(project=project_get_by_ref(project_ref=project), lines=fh)
        except (OSError, ServiceError) as exc:
            raise CommandError(str(exc)) from exc
        counts = ", ".join(f"{k}={v}" for k, v in result.as_counts().items())
        self.stdout.write(f"imported into {project}: {counts}")

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.graph_tools.importer import graph_import, graph_import_embed
from apps.graph_tools.management.progress import progress_bar
from apps.projects.errors import ServiceError
from apps.projects.selectors import project_get_by_ref


class Command(BaseCommand):
    help = "Import a JSON Lines graph file (PROTOCOL §5b) into a project: upsert by key, all or nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--project", required=True, help="project slug or id")

    def handle(self, *args: object, file: Path, project: str, **options: object) -> None:
        try:
            target = project_get_by_ref(project_ref=project)
            with file.open("rb") as fh:
                result = graph_import(project=target, lines=fh)
        except (OSError, ServiceError) as exc:
            raise CommandError(str(exc)) from exc
        result.entities_embedded = graph_import_embed(
            project_id=target.id, result=result, progress=progress_bar(self.stderr)
        )
        counts = ", ".join(f"{k}={v}" for k, v in result.as_counts().items())
        self.stdout.write(f"imported into {project}: {counts}")

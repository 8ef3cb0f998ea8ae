from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.errors import ServiceError
from apps.graph_tools.demo import demo_graph_lines
from apps.graph_tools.services import graph_import_as_operator


class Command(BaseCommand):
    help = "Load the demo world-geography graph (GeoNames, ISO) into a project."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug or id")

    def handle(self, *args: object, project: str, **options: object) -> None:
        try:
            done = graph_import_as_operator(project_ref=project, lines=demo_graph_lines())
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        counts = ", ".join(f"{k}={v}" for k, v in done.result.as_counts().items())
        if done.result.embedding is not None and done.result.embedding.pending:
            counts += (
                f"; {done.result.embedding.pending} entities wait for the embedding worker"
                f" (make run starts it; or: manage.py embed_graph --project {project})"
            )
        self.stdout.write(f"demo graph loaded into {project}: {counts}")

from django.core.management.base import BaseCommand, CommandParser

from apps.graph_tools.demo import demo_graph_lines
from apps.graph_tools.importer import graph_import, graph_import_embed
from apps.graph_tools.management.progress import progress_bar
from apps.projects.selectors import project_get_by_ref


class Command(BaseCommand):
    help = "Load the demo world-geography graph (GeoNames, ISO) into a project."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug or id")

    def handle(self, *args: object, project: str, **options: object) -> None:
        target = project_get_by_ref(project_ref=project)
        result = graph_import(project=target, lines=demo_graph_lines())
        result.entities_embedded = graph_import_embed(
            project_id=target.id, result=result, progress=progress_bar(self.stderr)
        )
        counts = ", ".join(f"{k}={v}" for k, v in result.as_counts().items())
        self.stdout.write(f"demo graph loaded into {project}: {counts}")

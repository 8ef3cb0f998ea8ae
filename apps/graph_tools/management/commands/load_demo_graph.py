from django.core.management.base import BaseCommand, CommandParser

from apps.graph_tools.demo import demo_graph_lines
from apps.graph_tools.importer import graph_import
from apps.projects.selectors import project_get_by_ref


class Command(BaseCommand):
    help = "Load the demo world-geography graph (GeoNames, ISO) into a project."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug or id")

    def handle(self, *args: object, project: str, **options: object) -> None:
        result = graph_import(project=project_get_by_ref(project_ref=project), lines=demo_graph_lines())
        counts = ", ".join(f"{k}={v}" for k, v in result.as_counts().items())
        self.stdout.write(f"demo graph loaded into {project}: {counts}")

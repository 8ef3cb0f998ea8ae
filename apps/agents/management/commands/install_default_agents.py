from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.agents.definitions import default_agents_install
from apps.projects.errors import ServiceError
from apps.projects.models import Project
from apps.projects.selectors import project_get_by_ref


class Command(BaseCommand):
    help = "Install the default agent definitions (graph-query-agent) into a project, or all. Idempotent."

    def add_arguments(self, parser: CommandParser) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--project", help="project slug or id")
        target.add_argument("--all", action="store_true", help="every project")

    def handle(self, *args: object, project: str | None, all: bool, **options: object) -> None:
        try:
            projects = list(Project.objects.all()) if all else [project_get_by_ref(project_ref=project or "")]
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        for p in projects:
            result = default_agents_install(project=p)
            self.stdout.write(
                f"{p.slug}: installed {', '.join(result.installed) or 'nothing'}; "
                f"existing {', '.join(result.existing) or 'none'}"
            )

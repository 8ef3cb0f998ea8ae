from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.agents.definitions import default_agents_install_as_operator
from apps.core.errors import ServiceError


class Command(BaseCommand):
    help = "Install the default agent definitions (graph-query-agent) into a project, or all. Idempotent."

    def add_arguments(self, parser: CommandParser) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--project", help="project slug or id")
        target.add_argument("--all", action="store_true", help="every project")

    def handle(self, *args: object, project: str | None, all: bool, **options: object) -> None:
        try:
            installed = default_agents_install_as_operator(project_ref=None if all else project or "")
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        for p, result in installed.items():
            self.stdout.write(
                f"{p.slug}: installed {', '.join(result.installed) or 'nothing'}; "
                f"existing {', '.join(result.existing) or 'none'}"
            )

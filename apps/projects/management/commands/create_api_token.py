from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.errors import ServiceError
from apps.projects.selectors import project_get_by_ref
from apps.projects.services import api_token_create


class Command(BaseCommand):
    help = "Create an API token for a user (optionally bound to one project); the token is printed once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--project", help="slug or id: the token only reaches this project")
        parser.add_argument("--name", default="", help="a label to recognise the token by")

    def handle(self, *args: object, username: str, project: str | None, name: str, **options: object) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        try:
            scope = project_get_by_ref(project_ref=project) if project else None
            _, secret = api_token_create(user=user, project=scope, name=name)
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(secret)

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core import embedded_db


class Command(BaseCommand):
    help = "Start, stop or inspect the embedded PostgreSQL cluster under .data/pg."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["start", "stop", "status", "url"])

    def handle(self, *args: object, action: str, **options: object) -> None:
        if action == "start":
            try:
                self.stdout.write(embedded_db.start())
            except embedded_db.EmbeddedDatabaseError as exc:
                raise CommandError(str(exc)) from exc
        elif action == "stop":
            self.stdout.write("stopped" if embedded_db.stop() else "not running")
        elif action == "status":
            self.stdout.write(embedded_db.status())
        elif action == "url":
            if not embedded_db.is_running():
                raise CommandError("the embedded database is not running: python manage.py embedded_db start")
            self.stdout.write(embedded_db.url())

from django.core.management.base import BaseCommand

from apps.chat.turns.recovery import interrupted_turns_recover


class Command(BaseCommand):
    help = "Mark agent runs and turns left running by stopped server processes as interrupted."
    # make run runs it after `migrate` has run the system checks (see bootstrap).
    requires_system_checks: list[str] = []

    def handle(self, *args: object, **options: object) -> None:
        closed = interrupted_turns_recover()
        self.stdout.write(f"{closed} interrupted run(s) recovered")

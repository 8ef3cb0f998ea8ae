"""Prepare a fresh installation: admin login, demo project with its graph, default agents."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from apps.agents.definitions import default_agents_install
from apps.graph_tools.demo import demo_graph_lines
from apps.graph_tools.importer import graph_import
from apps.graph_tools.models import GraphObject
from apps.projects.models import Project
from apps.projects.services import membership_set, project_create


class Command(BaseCommand):
    help = "Create the admin user (password printed once), the demo project and its graph. Idempotent."
    # make run runs it right after `migrate`, which has run the system checks; doing them again would
    # import the URLconf and with it the whole agent stack (~4 s of CPU) for nothing.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--demo-project", default="demo", help="slug of the demo project")
        parser.add_argument("--admin", default="admin", help="username of the superuser")

    def handle(self, *args: object, demo_project: str, admin: str, **options: object) -> None:
        User = get_user_model()
        user = User.objects.filter(username=admin).first()
        if user is None:
            password = secrets.token_urlsafe(12)
            user = User.objects.create_superuser(username=admin, email="", password=password)
            self.stdout.write(self.style.SUCCESS(f"Created the login  {admin} / {password}  (shown once)"))
        else:
            self.stdout.write(
                f"Login: {admin} (password shown when it was created; reset: manage.py changepassword {admin})"
            )

        project = Project.objects.filter(slug=demo_project).first()
        if project is None:
            project = project_create(owner=user, name="Demo: world geography", slug=demo_project)
            self.stdout.write(f"Created project {project.slug!r}")
        membership_set(project=project, user=user, role="owner")

        if not GraphObject.objects.filter(project=project).exists():
            self.stdout.write("Loading the demo graph (GeoNames world geography)…")
            result = graph_import(project=project, lines=demo_graph_lines())
            counts = ", ".join(f"{k}={v}" for k, v in result.as_counts().items())
            self.stdout.write(f"Demo graph loaded: {counts}")

        # The embedding worker (make run starts it) embeds the demo in the background: the server
        # answers at once, full-text and name search work meanwhile (issue 16).
        pending = GraphObject.objects.filter(project=project, embedding_pending=True).count()
        if pending:
            self.stdout.write(
                f"{pending} demo entities wait for the embedding worker (make run starts it; progress:"
                f" .data/embed_worker.log; or in the foreground: manage.py embed_graph --project {project.slug})"
            )

        installed = default_agents_install(project=project)
        if installed.installed:
            self.stdout.write(f"Installed default agents: {', '.join(installed.installed)}")

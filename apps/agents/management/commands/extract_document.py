from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.agents.extraction import extraction_step
from apps.core.errors import ServiceError
from apps.graph_tools.documents.extraction import change_set_progress, extraction_start_as_operator
from apps.graph_tools.documents.selectors import document_by_name_or_id
from apps.projects.selectors import project_get_by_ref


class Command(BaseCommand):
    help = (
        "Extract a document's entities and relationships as a change set to review (REST or the page). "
        "Without --run the background worker (manage.py embed_worker) does the work; with --run this "
        "command does it and prints the progress. Run again, it resumes where it stopped."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("document", help="the document's id or name")
        parser.add_argument("--project", required=True, help="project slug or id")
        parser.add_argument(
            "--run",
            action="store_true",
            help="ask the model here, a few passages at a time (KGCHAT_EXTRACTION_CONCURRENCY)",
        )

    def handle(self, *args: object, document: str, project: str, run: bool, **options: object) -> None:
        try:
            found = document_by_name_or_id(
                project_id=project_get_by_ref(project_ref=project).id, ref=document
            )
            change_set = extraction_start_as_operator(document=found)
            if run:

                def show() -> None:
                    change_set.refresh_from_db()
                    progress = change_set_progress(change_set)
                    self.stdout.write(
                        f"{found.name}: {progress.done + progress.failed}/{progress.total} passages "
                        f"({progress.failed} failed)"
                    )

                while change_set.status == "running" and extraction_step(after_each=show):
                    change_set.refresh_from_db()
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        change_set.refresh_from_db()
        progress = change_set_progress(change_set)
        self.stdout.write(
            f"{found.name}: change set {change_set.id} {change_set.status}; passages {progress.done} done, "
            f"{progress.failed} failed, {progress.pending} waiting; {change_set.items.count()} items"
        )

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.errors import ServiceError
from apps.documents.extraction.services import DocumentExtraction, document_extract


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
        def show(now: DocumentExtraction) -> None:
            progress = now.progress
            self.stdout.write(
                f"{now.document_name}: {progress.done + progress.failed}/{progress.total} passages "
                f"({progress.failed} failed)"
            )

        try:
            end = document_extract(project_ref=project, document_ref=document, run=run, on_progress=show)
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        progress = end.progress
        self.stdout.write(
            f"{end.document_name}: change set {end.change_set.id} {end.change_set.status}; passages "
            f"{progress.done} done, {progress.failed} failed, {progress.pending} waiting; {end.items} items"
        )

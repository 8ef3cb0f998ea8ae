from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.errors import ServiceError
from apps.documents.services import document_upload_as_operator


class Command(BaseCommand):
    help = (
        "Upload a document (text, Markdown, HTML or PDF) into a project: split into passages, searchable "
        "at once by full text, embedded by the background worker. Uploading a name again keeps the "
        "passages whose text did not change."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--project", required=True, help="project slug or id")
        parser.add_argument("--name", default=None, help="the document's name (default: the file's name)")

    def handle(self, *args: object, file: Path, project: str, name: str | None, **options: object) -> None:
        try:
            data = file.read_bytes()
            result = document_upload_as_operator(project_ref=project, name=name or file.name, data=data)
        except (OSError, ServiceError) as exc:
            raise CommandError(str(exc)) from exc
        document = result.document
        if not result.changed:
            self.stdout.write(f"{document.name}: unchanged (same content), nothing to do")
            return
        self.stdout.write(
            f"{document.name} ({document.format}) {'created' if result.created else 'updated'} in {project}: "
            f"passages kept={result.passages_kept} added={result.passages_added} "
            f"removed={result.passages_removed}; id {document.id}"
        )

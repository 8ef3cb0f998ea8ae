"""Extraction for the transports: the REST routes (start, the latest change set, the project's
settings) and ``manage.py extract_document`` (start, and with ``--run`` extract here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from apps.documents.extraction.queue import ExtractionProgress, change_set_progress, extraction_start
from apps.documents.extraction.step import extraction_step
from apps.documents.models import ChangeSet, Document, ExtractionSettings
from apps.documents.review import ChangeSetNotFound
from apps.documents.selectors import document_by_name_or_id, document_of_project
from apps.projects.models import Role
from apps.projects.selectors import Principal, project_get, project_get_by_ref


def extraction_model() -> str:
    """The project's model: the one plain conversations use (``KGCHAT_MODEL`` overrides it)."""
    return (settings.KGCHAT_MODEL or settings.KGCHAT_CHAT_MODEL).strip()


def extraction_start_as_member(
    *, principal: Principal, project_ref: object, document_id: object
) -> ChangeSet:
    """Start (or return the running) extraction of a document, as an editor or owner."""
    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.EDITOR)
    document = document_of_project(project_id=project.id, document_id=document_id)
    return extraction_start(document=document, model=extraction_model(), user_id=principal.user_id)


def extraction_start_as_operator(*, document: Document) -> ChangeSet:
    return extraction_start(document=document, model=extraction_model(), user_id=None)


def change_set_latest(*, principal: Principal, project_ref: object, document_id: object) -> ChangeSet:
    """The newest change set of a document a member may see (``ChangeSetNotFound``: none yet)."""
    project = project_get(principal=principal, project_ref=project_ref)
    document = document_of_project(project_id=project.id, document_id=document_id)
    change_set = ChangeSet.objects.filter(document=document).select_related("document").first()
    if change_set is None:
        raise ChangeSetNotFound("this document has not been extracted yet")
    return change_set


def extraction_settings_get(*, principal: Principal, project_ref: object) -> ExtractionSettings:
    project = project_get(principal=principal, project_ref=project_ref)
    return ExtractionSettings.objects.filter(project=project).first() or ExtractionSettings(project=project)


def extraction_settings_set(
    *,
    principal: Principal,
    project_ref: object,
    allow_new_types: bool | None,
    owners_auto_approve: bool | None,
) -> ExtractionSettings:
    """Change a project's extraction settings (owners)."""
    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.OWNER)
    row, _ = ExtractionSettings.objects.get_or_create(project=project)
    if allow_new_types is not None:
        row.allow_new_types = allow_new_types
    if owners_auto_approve is not None:
        row.owners_auto_approve = owners_auto_approve
    row.save()
    return row


@dataclass
class DocumentExtraction:
    """Where a document's extraction stands: its change set, its passages, its items (counted at
    the end only; None in the progress shown meanwhile)."""

    document_name: str
    change_set: ChangeSet
    progress: ExtractionProgress
    items: int | None = None


def document_extract(
    *,
    project_ref: str,
    document_ref: str,
    run: bool = False,
    on_progress: Callable[[DocumentExtraction], None] | None = None,
) -> DocumentExtraction:
    """``manage.py extract_document``: start (or resume) the operator's extraction of a project's
    document, and with ``run`` extract its passages here until none waits, ``on_progress`` after
    each passage. Where it stands at the end."""
    document = document_by_name_or_id(
        project_id=project_get_by_ref(project_ref=project_ref).id, ref=document_ref
    )
    change_set = extraction_start_as_operator(document=document)

    def standing() -> DocumentExtraction:
        change_set.refresh_from_db()
        return DocumentExtraction(document.name, change_set, change_set_progress(change_set))

    def shown() -> None:
        if on_progress is not None:
            on_progress(standing())

    while run and change_set.status == "running" and extraction_step(after_each=shown):
        change_set.refresh_from_db()
    end = standing()
    end.items = change_set.items.count()
    return end

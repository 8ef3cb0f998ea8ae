"""Writes of a project's ontology (#51): import, the enforcement setting, delete, and its draft.

Only the project's editors and owners change it (``RoleTooLow`` otherwise). An import or a delete
raises the project's graph version by one, in its transaction: the tools' schemas (``query_paths``'
enums), extraction's and the agents' cached vocabularies follow the graph version, so they follow
the ontology at once.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.graph_tools.errors import OntologyExists, OntologyInvalid, OntologyNotFound
from apps.graph_tools.importer import project_write_turn
from apps.graph_tools.models import ProjectOntology
from apps.graph_tools.ontology.document import ENFORCEMENTS, Ontology, ontology_parse
from apps.graph_tools.ontology.formats import format_of, ontology_read
from apps.graph_tools.versions import graph_version_bump
from apps.projects.models import Role
from apps.projects.selectors import Principal, project_get


def _editable(principal: Principal, project_ref: object) -> uuid.UUID:
    return project_get(principal=principal, project_ref=project_ref, min_role=Role.EDITOR).id


def ontology_store(
    *, project_id: uuid.UUID, ontology: Ontology, user_id: int | None, on_violation: str | None = None
) -> ProjectOntology:
    """Put ``ontology`` in force in the project (replacing any), its draft discarded; one graph
    version. ``on_violation`` (else the document's) is how writes that break it are treated."""
    with transaction.atomic():
        project_write_turn(project_id)
        row, _ = ProjectOntology.objects.select_for_update().get_or_create(project_id=project_id)
        row.document = ontology.as_document(with_setting=False)
        row.on_violation = on_violation or ontology.on_violation
        row.draft, row.draft_notes, row.draft_at = None, "", None
        row.updated_by_id = user_id
        row.save()
        graph_version_bump(project_id=project_id)
    return row


def ontology_import(
    *,
    principal: Principal,
    project_ref: object,
    data: bytes,
    asked_format: str | None = None,
    content_type: str = "",
    filename: str = "",
    on_violation: str | None = None,
) -> ProjectOntology:
    """Import the ontology file ``data`` (its format ``formats.format_of`` tells) into a project the
    principal edits: the role is checked before the file is read (``RoleTooLow``, then
    ``OntologyInvalid`` or ``OntologyTooLarge``)."""
    if on_violation is not None and on_violation not in ENFORCEMENTS:
        raise OntologyInvalid(f"onViolation must be one of {', '.join(ENFORCEMENTS)}")
    project_id = _editable(principal, project_ref)
    fmt = format_of(asked=asked_format, content_type=content_type, filename=filename)
    ontology = ontology_read(data, fmt)
    return ontology_store(
        project_id=project_id, ontology=ontology, user_id=principal.user_id, on_violation=on_violation
    )


def ontology_enforcement_set(
    *, principal: Principal, project_ref: object, on_violation: str
) -> ProjectOntology:
    """Set how the write tools treat a write that breaks the project's ontology: ``refuse`` it
    (``400 ontology_violation``) or accept it and ``flag`` it for review."""
    if on_violation not in ENFORCEMENTS:
        raise OntologyInvalid(f"onViolation must be one of {', '.join(ENFORCEMENTS)}")
    project_id = _editable(principal, project_ref)
    with transaction.atomic():
        row = ProjectOntology.objects.select_for_update().filter(project_id=project_id).first()
        if row is None or row.document is None:
            raise OntologyNotFound()
        row.on_violation, row.updated_by_id = on_violation, principal.user_id
        row.save(update_fields=["on_violation", "updated_by", "updated_at"])
    return row


def ontology_delete(*, principal: Principal, project_ref: object) -> None:
    """Remove the project's ontology (its draft too): its writes are checked against nothing again."""
    project_id = _editable(principal, project_ref)
    with transaction.atomic():
        project_write_turn(project_id)
        deleted, _ = ProjectOntology.objects.filter(project_id=project_id, document__isnull=False).delete()
        if not deleted:
            raise OntologyNotFound()
        graph_version_bump(project_id=project_id)


def ontology_draft_store(
    *, project_id: uuid.UUID, document: dict[str, Any], notes: str = ""
) -> ProjectOntology:
    """Keep a proposed ontology as the project's draft, to be reviewed and accepted (checked first:
    ``OntologyInvalid``). Refused (``OntologyExists``) once the project has an ontology."""
    ontology = ontology_parse(document)
    with transaction.atomic():
        row, _ = ProjectOntology.objects.select_for_update().get_or_create(project_id=project_id)
        if row.document is not None:
            raise OntologyExists()
        row.draft = ontology.as_document()
        row.draft_notes, row.draft_at = notes[:4000], timezone.now()
        row.save()
    return row


def ontology_draft_accept(*, principal: Principal, project_ref: object) -> ProjectOntology:
    """Accept the project's draft: import it as its ontology (``OntologyNotFound``: no draft)."""
    project_id = _editable(principal, project_ref)
    row = ProjectOntology.objects.filter(project_id=project_id).first()
    if row is None or row.draft is None:
        raise OntologyNotFound("this project has no draft ontology to accept")
    if row.document is not None:
        raise OntologyExists()
    return ontology_store(
        project_id=project_id, ontology=ontology_parse(row.draft), user_id=principal.user_id
    )


def ontology_draft_discard(*, principal: Principal, project_ref: object) -> None:
    """Throw the project's draft away (``OntologyNotFound``: no draft)."""
    project_id = _editable(principal, project_ref)
    updated = ProjectOntology.objects.filter(project_id=project_id, draft__isnull=False).update(
        draft=None, draft_notes="", draft_at=None
    )
    if not updated:
        raise OntologyNotFound("this project has no draft ontology")

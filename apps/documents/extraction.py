"""Extraction as a proposal (issue 26 item 3), the graph's side: which passages to ask, the JSON
Schema the model answers under, the queue's claims, retries and progress, entity resolution, the
change set and its review, written through the write services.

The model itself is asked by ``apps/agents/extraction.py`` (only agents talks to models), which
registers its step with the one background worker (``graph_tools.jobs``): the worker embeds what
waits, then extracts what waits, a few passages at a time.

A change set covers one document's passages not in an earlier change set: a re-uploaded document
with one changed paragraph proposes only what that paragraph says.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from apps.documents.change_sets import ChangeSetNotFound, change_set_maybe_finish
from apps.documents.mentions import PassageNames
from apps.documents.models import ChangeSet, Document, ExtractionSettings, ExtractionStatus, Passage
from apps.graph_tools.names import normalised_name
from apps.graph_tools.selectors import graph_vocabulary
from apps.projects.models import Role
from apps.projects.selectors import Principal, project_get

# A passage whose model call failed this many times is marked failed and skipped.
EXTRACTION_ATTEMPTS = 3
# The first retry waits this long, each later one twice as long (a rate limit's usual cure).
BACKOFF_SECONDS = 5.0
# A claimed passage is not claimed again for this long: longer than a model call may take. A
# worker that dies leaves it to the next one after the lease.
LEASE_SECONDS = 300
MAX_MENTIONS = 50  # entities and relationships read from one passage's answer


@dataclass(frozen=True)
class ExtractionSpec:
    """What the model is asked for one passage: the schema, the types it may use, its instructions."""

    schema: dict[str, Any]
    entity_types: tuple[str, ...]
    relationship_types: tuple[str, ...]
    relationships: tuple[tuple[str, str, str], ...]
    free_types: bool


def extraction_spec(*, project_id: uuid.UUID) -> ExtractionSpec:
    """The JSON Schema of one passage's answer, built from the project's entity and relationship
    types (enums); free strings when the project allows new types or has none yet."""
    vocabulary = graph_vocabulary(project_id=project_id)
    settings_row = ExtractionSettings.objects.filter(project_id=project_id).first()
    free = bool(settings_row and settings_row.allow_new_types) or not vocabulary.entity_types
    entity_type: dict[str, Any] = {"type": "string"}
    relationship_type: dict[str, Any] = {"type": "string"}
    if not free:
        entity_type = {"type": "string", "enum": list(vocabulary.entity_types)}
        if vocabulary.relationship_types:
            relationship_type = {"type": "string", "enum": list(vocabulary.relationship_types)}
    schema = {
        "type": "object",
        "properties": {
            "entities": {
                "type": "array",
                "items": {
                    "type": "object",
                    # No description: on the offline default it doubled the tokens of an answer (and
                    # so its time); one given anyway is kept.
                    "properties": {"name": {"type": "string"}, "type": entity_type},
                    "required": ["name", "type"],
                    "additionalProperties": False,
                },
            },
            "relationships": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "source": {"type": "string"},
                        "type": relationship_type,
                        "target": {"type": "string"},
                    },
                    "required": ["source", "type", "target"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["entities", "relationships"],
        "additionalProperties": False,
    }
    return ExtractionSpec(
        schema=schema,
        entity_types=vocabulary.entity_types,
        relationship_types=vocabulary.relationship_types,
        relationships=vocabulary.relationships,
        free_types=free,
    )


def _clean(value: Any, limit: int) -> str:
    return " ".join(str(value).split())[:limit] if isinstance(value, str) else ""


def extraction_output_clean(
    output: Any, spec: ExtractionSpec, *, text: str | None = None
) -> dict[str, list[dict[str, str]]]:
    """The model's answer as the schema allows it: unknown types (when new ones are not allowed),
    blank names and anything malformed are left out.

    With the passage's ``text``, the answer is checked against it (``mentions.PassageNames``): a
    name is taken as the passage spells it (a misspelt copy mended, "it" or "the country" read as
    the entity the passage is about), and an entity or relationship naming what the passage does
    not is left out. (The ends' types are checked when the change set is built, once every
    passage has typed its names: ``change_sets.change_set_build``.)"""
    entities: list[dict[str, str]] = []
    relationships: list[dict[str, str]] = []
    if not isinstance(output, dict):
        return {"entities": entities, "relationships": relationships}
    for item in (output.get("entities") or [])[:MAX_MENTIONS]:
        if not isinstance(item, dict):
            continue
        name, type_ = _clean(item.get("name"), 512), _clean(item.get("type"), 128)
        if not name or not type_ or (not spec.free_types and type_ not in spec.entity_types):
            continue
        entities.append({"name": name, "type": type_, "description": _clean(item.get("description"), 2000)})
    for item in (output.get("relationships") or [])[:MAX_MENTIONS]:
        if not isinstance(item, dict):
            continue
        source, type_, target = (_clean(item.get(k), 512) for k in ("source", "type", "target"))
        if not source or not target or not type_:
            continue
        if not spec.free_types and spec.relationship_types and type_ not in spec.relationship_types:
            continue
        relationships.append({"source": source, "type": type_[:128], "target": target})
    if text is not None:
        entities, relationships = _as_the_passage_says(entities, relationships, text, spec.entity_types)
    return {"entities": entities, "relationships": relationships}


def _as_the_passage_says(
    entities: list[dict[str, str]], relationships: list[dict[str, str]], text: str, types: tuple[str, ...]
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """``extraction_output_clean``'s check against the passage (and the project's entity types)."""
    names = PassageNames(text, types)
    kept: dict[str, dict[str, str]] = {}
    for entity in entities:
        found = names.find(entity["name"])
        if found is not None and normalised_name(found) not in kept:
            kept[normalised_name(found)] = {**entity, "name": found}
    names.typed((e["name"], e["type"]) for e in kept.values())
    stated: list[dict[str, str]] = []
    for rel in relationships:
        source, target = names.find(rel["source"]), names.find(rel["target"])
        if source is None or target is None or normalised_name(source) == normalised_name(target):
            continue
        stated.append({"source": source, "type": rel["type"], "target": target})
    return list(kept.values()), stated


# --- starting, claiming, storing ----------------------------------------------------------------


def extraction_start(*, document: Document, model: str, user_id: int | None) -> ChangeSet:
    """Start extracting a document's passages that no earlier change set covered (or return the
    running one). A document with nothing new gets an empty change set at once."""
    with transaction.atomic():
        Document.objects.select_for_update().filter(id=document.id).first()
        running = ChangeSet.objects.filter(document=document, status=ExtractionStatus.RUNNING).first()
        if running is not None:
            return running
        covered: set[str] = set()
        for ids in ChangeSet.objects.filter(document=document).values_list("passage_ids", flat=True):
            covered.update(ids)
        passages = [
            str(pid)
            for pid in Passage.objects.filter(document=document)
            .order_by("ordinal")
            .values_list("id", flat=True)
            if str(pid) not in covered
        ]
        owner = user_id is not None and project_role_is_owner(document.project_id, user_id)
        settings_row = ExtractionSettings.objects.filter(project_id=document.project_id).first()
        change_set = ChangeSet.objects.create(
            project_id=document.project_id,
            document=document,
            model=model,
            passage_ids=passages,
            requested_by_id=user_id,
            auto_approve=bool(owner and settings_row and settings_row.owners_auto_approve),
        )
        # A passage extracted before (its text unchanged since) keeps its answer.
        Passage.objects.filter(id__in=passages).exclude(extraction_state="done").update(
            extraction_state="pending", extraction_attempts=0, extraction_error="", extraction_not_before=None
        )
    change_set_maybe_finish(change_set_id=change_set.id)
    change_set.refresh_from_db()
    return change_set


def project_role_is_owner(project_id: uuid.UUID, user_id: int) -> bool:
    from apps.projects.models import ProjectMembership

    return ProjectMembership.objects.filter(project_id=project_id, user_id=user_id, role=Role.OWNER).exists()


@dataclass(frozen=True)
class ClaimedPassage:
    id: uuid.UUID
    project_id: uuid.UUID
    document_id: uuid.UUID
    document_name: str
    text: str
    attempt: int
    change_set_id: uuid.UUID
    model: str


_CLAIM_SQL = """
    UPDATE kb.document_passages p
    SET extraction_not_before = clock_timestamp() + make_interval(secs => %(lease)s),
        extraction_attempts = p.extraction_attempts + 1
    WHERE p.id = (
        SELECT id FROM kb.document_passages
        WHERE extraction_state = 'pending' AND (extraction_not_before IS NULL OR extraction_not_before <= clock_timestamp())
        ORDER BY extraction_not_before NULLS FIRST, document_id, ordinal
        LIMIT 1 FOR UPDATE SKIP LOCKED
    )
    RETURNING p.id, p.project_id, p.document_id, p.text, p.extraction_attempts
"""


def extraction_claim(*, lease_seconds: float = LEASE_SECONDS) -> ClaimedPassage | None:
    """Claim the next passage waiting for the model (None: nothing waits now). The claim is a lease:
    the passage stays pending, so a worker that dies leaves it to another after ``lease_seconds``."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_CLAIM_SQL, {"lease": lease_seconds})
        row = cursor.fetchone()
        if row is None:
            return None
        passage_id, project_id, document_id, text, attempt = row
        change_set = (
            ChangeSet.objects.filter(document_id=document_id, status=ExtractionStatus.RUNNING)
            .select_related("document")
            .first()
        )
        if change_set is None:  # no extraction asked for it any more
            Passage.objects.filter(id=passage_id).update(extraction_state="", extraction_not_before=None)
            return extraction_claim(lease_seconds=lease_seconds)
        return ClaimedPassage(
            id=passage_id,
            project_id=project_id,
            document_id=document_id,
            document_name=change_set.document.name,
            text=text,
            attempt=attempt,
            change_set_id=change_set.id,
            model=change_set.model,
        )


def extraction_store(*, passage_id: uuid.UUID, output: dict[str, Any]) -> bool:
    """Store one passage's answer; False when the passage (or its document) is gone meanwhile."""
    updated = Passage.objects.filter(id=passage_id, extraction_state="pending").update(
        extraction_state="done", extracted=output, extraction_error="", extraction_not_before=None
    )
    if updated:
        _finish_for_passage(passage_id)
    return bool(updated)


def extraction_fail(*, passage_id: uuid.UUID, error: str, attempt: int) -> str:
    """Record a failed model call: retried after a backoff, or, after ``EXTRACTION_ATTEMPTS``, the
    passage is marked failed and skipped. Return the passage's state."""
    if attempt >= EXTRACTION_ATTEMPTS:
        Passage.objects.filter(id=passage_id, extraction_state="pending").update(
            extraction_state="failed", extraction_error=error[:2000], extraction_not_before=None
        )
        _finish_for_passage(passage_id)
        return "failed"
    delay = BACKOFF_SECONDS * (2 ** (attempt - 1))
    Passage.objects.filter(id=passage_id, extraction_state="pending").update(
        extraction_error=error[:2000], extraction_not_before=timezone.now() + timedelta(seconds=delay)
    )
    return "pending"


def _finish_for_passage(passage_id: uuid.UUID) -> None:
    document_id = Passage.objects.filter(id=passage_id).values_list("document_id", flat=True).first()
    if document_id is None:  # deleted with its document meanwhile
        return
    change_set = ChangeSet.objects.filter(document_id=document_id, status=ExtractionStatus.RUNNING).first()
    if change_set is not None:
        change_set_maybe_finish(change_set_id=change_set.id)


@dataclass(frozen=True)
class ExtractionProgress:
    total: int
    done: int
    failed: int
    pending: int


def change_set_progress(change_set: ChangeSet) -> ExtractionProgress:
    states = list(
        Passage.objects.filter(id__in=change_set.passage_ids).values_list("extraction_state", flat=True)
    )
    done = sum(1 for s in states if s == "done")
    failed = sum(1 for s in states if s == "failed")
    return ExtractionProgress(
        total=len(states), done=done, failed=failed, pending=len(states) - done - failed
    )


# --- entity resolution and the change set -------------------------------------------------------


# --- for the transports --------------------------------------------------------------------------


def extraction_model() -> str:
    """The project's model: the one plain conversations use (``KGCHAT_MODEL`` overrides it)."""
    from django.conf import settings

    return (settings.KGCHAT_MODEL or settings.KGCHAT_CHAT_MODEL).strip()


def extraction_start_as_member(
    *, principal: Principal, project_ref: object, document_id: object
) -> ChangeSet:
    """Start (or return the running) extraction of a document, as an editor or owner."""
    from apps.documents.selectors import document_of_project

    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.EDITOR)
    document = document_of_project(project_id=project.id, document_id=document_id)
    return extraction_start(document=document, model=extraction_model(), user_id=principal.user_id)


def extraction_start_as_operator(*, document: Document) -> ChangeSet:
    return extraction_start(document=document, model=extraction_model(), user_id=None)


def change_set_latest(*, principal: Principal, project_ref: object, document_id: object) -> ChangeSet:
    """The newest change set of a document a member may see (``ChangeSetNotFound``: none yet)."""
    from apps.documents.selectors import document_of_project

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

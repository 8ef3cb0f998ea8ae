"""A document's extraction as a queue of its passages: started (a change set over the passages no
earlier one covered), each passage claimed with a lease (``FOR UPDATE SKIP LOCKED``), its answer
stored or its failure recorded (retried after a backoff, then marked failed and skipped), and the
change set finished when none waits (``change_sets.change_set_maybe_finish``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from apps.documents.change_sets import change_set_maybe_finish
from apps.documents.models import ChangeSet, Document, ExtractionSettings, ExtractionStatus, Passage
from apps.projects.models import Role

# A passage whose model call failed this many times is marked failed and skipped.
EXTRACTION_ATTEMPTS = 3
# The first retry waits this long, each later one twice as long (a rate limit's usual cure).
BACKOFF_SECONDS = 5.0
# A claimed passage is not claimed again for this long: longer than a model call may take. A
# worker that dies leaves it to the next one after the lease.
LEASE_SECONDS = 300


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
            document_name=change_set.document.name if change_set.document else "",
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

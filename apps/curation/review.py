"""The decision on a curation change set (#51), through the one decision of every change set
(``documents.review.change_set_decide``, which hands curation change sets here: registered by
``CurationConfig.ready``).

Reviewed like an extraction's, by an editor or owner, with one rule more: its author may not
approve it unless the project's ``CurationSettings.authors_approve_own`` says so (anyone may reject
or withdraw). The approved items are written through the write tools in one transaction with one
graph version (authority ``curation``, one ``GraphChange`` per entity or relationship changed);
when one of them cannot be written (the graph moved on since the proposal) nothing is written, the
change set stays in review and the error names the item.
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.core.errors import PermissionDenied, ServiceError
from apps.curation.models import CurationSettings
from apps.documents.models import ChangeSet, ChangeSetItem, ExtractionStatus
from apps.documents.review import ChangeSetNotPending, decision_mark
from apps.graph_tools.models import ChangeAuthority
from apps.graph_tools.registry import WriteAuthorization
from apps.graph_tools.write_sets import SetStep, write_apply_set, write_step_args
from apps.graph_tools.writes import json_safe
from apps.projects.models import Role
from apps.projects.selectors import Principal, project_get


class OwnChangeSet(PermissionDenied):
    code = "own_change_set"


class ChangeSetApplyFailed(ServiceError):
    status = 409
    code = "change_set_apply_failed"


def curation_settings_get(*, principal: Principal, project_ref: object) -> CurationSettings:
    project = project_get(principal=principal, project_ref=project_ref)
    return CurationSettings.objects.filter(project=project).first() or CurationSettings(project=project)


def curation_settings_set(
    *, principal: Principal, project_ref: object, authors_approve_own: bool | None
) -> CurationSettings:
    """Change a project's curation settings (owners)."""
    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.OWNER)
    row, _ = CurationSettings.objects.get_or_create(project=project)
    if authors_approve_own is not None:
        row.authors_approve_own = authors_approve_own
        row.save()
    return row


def _may_approve_own(change_set: ChangeSet) -> bool:
    return CurationSettings.objects.filter(
        project_id=change_set.project_id, authors_approve_own=True
    ).exists()


def curation_decide(
    *,
    principal: Principal,
    change_set: ChangeSet,
    approve: list[int] | None,
    reject: list[int],
    edits: dict[int, dict[str, Any]],
) -> None:
    """Decide items of a curation change set (the caller checked the principal is an editor or
    owner): ``approve`` None approves every pending item, all written or none."""
    if edits:
        raise ServiceError("a curation change set's items are decided as proposed: edits are for extractions")
    with transaction.atomic():
        locked = ChangeSet.objects.select_for_update().get(id=change_set.id)
        if locked.status != ExtractionStatus.REVIEW:
            raise ChangeSetNotPending(f"this change set is {locked.status}: nothing to decide")
        items = list(ChangeSetItem.objects.filter(change_set=locked).order_by("ordinal"))
        chosen = decision_mark(items, approve=approve, reject=reject, edits={})
        approved = [i for i in items if i.id in chosen and i.status == "pending"]
        if approved and locked.requested_by_id == principal.user_id and not _may_approve_own(locked):
            raise OwnChangeSet(
                "another editor or owner must approve this change set: you proposed it "
                "(a project owner may let authors approve their own in the curation settings)"
            )
        version = _write(locked, approved, principal.user_id)
        for item in items:
            item.save(update_fields=["status", "result"])
        if not any(i.status == "pending" for i in items):
            locked.status = ExtractionStatus.APPLIED
        locked.decided_by_id, locked.decided_at = principal.user_id, timezone.now()
        if version is not None:
            locked.graph_version = version
        locked.save()


def _write(change_set: ChangeSet, approved: list[ChangeSetItem], user_id: int) -> int | None:
    """Write the approved items as one set; raise ``ChangeSetApplyFailed`` (rolling it all back)
    when one cannot be written."""
    steps = [
        SetStep(item.action, functools.partial(write_step_args, item.action, item.values))
        for item in approved
    ]
    version = write_apply_set(
        project_id=change_set.project_id,
        steps=steps,
        authorization=WriteAuthorization(via=ChangeAuthority.CURATION, user_id=user_id),
    )
    for item, step in zip(approved, steps, strict=True):
        if step.error is not None:
            raise ChangeSetApplyFailed(
                f"item {item.id} ({item.action}) cannot be written any more: {step.error['error']}; "
                "nothing was written and the change set stays in review",
            )
        item.status, item.result = "applied", json_safe(step.result)
    return version

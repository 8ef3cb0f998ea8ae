"""Curation change sets (#51): a member's edits of the graph proposed as a change set of the existing
kind (``documents.ChangeSet``, ``kind="curation"``), reviewed like an extraction's through its
decision (``apps/curation/review.py`` decides them), and undone by proposing the inverse.

Each change is a write tool call, ``{"action": <write tool>, "args": {...}}`` (``update_entity``,
``delete_entity``, ``create_relationship``, ``delete_relationship``, ``merge_entities``, …). A
proposal is checked by running the whole set through the write tools in a transaction that is
then rolled back, so a change that depends on an earlier one of the same set (a relationship to an
entity the set restores) is checked as it will be applied, and the plan of each is kept as its
item's evidence.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q

from apps.core.errors import ServiceError
from apps.core.inputs import input_check
from apps.curation.inverses import change_set_inverse
from apps.curation.selectors import entity_ids_named, merges_pending
from apps.documents.models import ChangeSet, ChangeSetItem, ChangeSetKind, ExtractionStatus
from apps.documents.review import change_set_get
from apps.graph_tools.errors import ToolError
from apps.graph_tools.models import ChangeAuthority
from apps.graph_tools.registry import WriteAuthorization
from apps.graph_tools.write_sets import SetStep, write_apply_set, write_step_args
from apps.graph_tools.writes import WRITES, json_safe
from apps.projects.models import Role
from apps.projects.selectors import Principal, project_get

MAX_CHANGES = 100
MAX_SUMMARY = 2000


class InvalidChange(ServiceError):
    """a change of the set cannot be made"""

    code = "invalid_change"

    def __init__(self, message: str, *, code: str | None = None, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message, code=code)
        # The write tool's own extra keys of the REST error body (an ontology's "rule", "violations").
        self.extra = extra or {}


class NothingToUndo(ServiceError):
    status = 409
    code = "nothing_to_undo"


class MergePending(ServiceError):
    """The two entities are already proposed for a merge by a change set waiting for review."""

    status = 409
    code = "merge_pending"

    def __init__(self, message: str, *, change_set_id: str) -> None:
        super().__init__(message)
        self.extra = {"changeSetId": change_set_id}


class _DryRun(Exception):
    """Raised to roll a proposal's check back."""


def _changes_checked(changes: object, *, undo: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """``changes`` as (write tool, arguments), each validated by its tool's argument model; an
    internal write (``restore_entity``) only in an ``undo``'s."""
    if not isinstance(changes, list) or not changes:
        raise InvalidChange("changes must be a non-empty list of {action, args}", code="invalid_request")
    if len(changes) > MAX_CHANGES:
        raise InvalidChange(f"at most {MAX_CHANGES} changes a change set", code="invalid_request")
    input_check(changes, field="changes")
    checked = []
    for n, change in enumerate(changes):
        if not isinstance(change, dict) or set(change) - {"action", "args"} or "action" not in change:
            raise InvalidChange(f"changes[{n}] must be an object {{action, args}}", code="invalid_request")
        action, args = change["action"], change.get("args", {})
        if action not in WRITES or (WRITES[action].internal and not undo):
            tools = ", ".join(k.name for k in WRITES.values() if not k.internal)
            raise InvalidChange(
                f"changes[{n}].action {action!r} is not a write tool; one of: {tools}", code="unknown_action"
            )
        try:
            write_step_args(action, args)
        except ToolError as exc:
            raise InvalidChange(f"changes[{n}]: {exc.message}", code=exc.code) from None
        checked.append((str(action), dict(args)))
    return checked


def _checked_plans(project_id: uuid.UUID, changes: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Run the whole set through the write tools and roll it back: each change's plan (summary and
    field changes), or ``InvalidChange`` naming the first that cannot run or would change nothing."""
    steps = [SetStep(action, functools.partial(write_step_args, action, args)) for action, args in changes]
    try:
        with transaction.atomic():
            write_apply_set(
                project_id=project_id,
                steps=steps,
                authorization=WriteAuthorization(via=ChangeAuthority.CURATION),
            )
            raise _DryRun
    except _DryRun:
        pass
    for n, (step, (action, _)) in enumerate(zip(steps, changes, strict=True)):
        if step.error is not None:
            extra = {k: v for k, v in step.error.items() if k not in ("error", "code")}
            raise InvalidChange(
                f"changes[{n}] ({action}): {step.error['error']}", code=step.error["code"], extra=extra
            )
        assert step.result is not None
        if not step.result["changed"]:
            raise InvalidChange(
                f"changes[{n}] ({action}): {step.result['summary']}", code="nothing_to_change"
            )
    return [
        json_safe({"summary": s.result["summary"], "changes": s.result["changes"]}) for s in steps if s.result
    ]


def _merges_not_pending(project_id: uuid.UUID, changes: list[tuple[str, dict[str, Any]]]) -> None:
    """Refuse a merge of two entities a change set in review already proposes to merge (either way
    round), naming it: ``MergePending``. Holds the project's lock on merge proposals until the
    transaction ends, so of two proposals of one merge at once the second sees the first."""
    merges = [(n, args) for n, (action, args) in enumerate(changes) if action == "merge_entities"]
    if not merges:
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"curation-merges:{project_id}"])
    named = entity_ids_named(
        project_id=project_id, refs=[args[side] for _, args in merges for side in ("keep", "merge")]
    )
    pending = merges_pending(project_id=project_id)
    for n, args in merges:
        waiting = pending.get(frozenset((named.get(args["keep"], ""), named.get(args["merge"], ""))))
        if waiting is not None:
            raise MergePending(
                f"changes[{n}] (merge_entities): change set {waiting} already proposes merging these two "
                "entities and waits for review: approve or reject it first",
                change_set_id=waiting,
            )


def curation_propose(
    *,
    principal: Principal,
    project_id: object,
    changes: list[dict[str, Any]],
    summary: str = "",
    undoes: ChangeSet | None = None,
) -> ChangeSet:
    """Propose ``changes`` to a project's graph as a curation change set waiting for review, as one
    of its editors or owners; checked through the write tools first (``InvalidChange``: 400 with
    the change at fault and why; nothing stored), and a merge another change set in review proposes
    already refused (``MergePending``: 409 naming it)."""
    project = project_get(principal=principal, project_ref=project_id, min_role=Role.EDITOR)
    input_check(summary, field="summary")
    if not isinstance(summary, str) or len(summary) > MAX_SUMMARY:
        raise InvalidChange(
            f"summary must be a text of at most {MAX_SUMMARY} characters", code="invalid_request"
        )
    checked = _changes_checked(changes, undo=undoes is not None)
    plans = _checked_plans(project.id, checked)
    with transaction.atomic():
        _merges_not_pending(project.id, checked)
        change_set = ChangeSet.objects.create(
            project=project,
            kind=ChangeSetKind.CURATION,
            status=ExtractionStatus.REVIEW,
            requested_by_id=principal.user_id,
            summary=" ".join(summary.split()) or "; ".join(p["summary"] for p in plans)[:MAX_SUMMARY],
            undoes=undoes,
        )
        ChangeSetItem.objects.bulk_create(
            ChangeSetItem(
                change_set=change_set,
                ordinal=n,
                action=action,
                values=args,
                evidence={"plan": plan},
            )
            for n, ((action, args), plan) in enumerate(zip(checked, plans, strict=True))
        )
    return change_set_get(principal=principal, change_set_id=change_set.id)


def _undo_standing(original: ChangeSet) -> ChangeSet | None:
    """An undo of ``original`` that waits for review, or one that was written and stands (not
    undone in turn); None when ``original`` may be undone. An undo rejected whole wrote nothing."""
    redone = ChangeSet.objects.filter(
        undoes=OuterRef("pk"), status=ExtractionStatus.APPLIED, graph_version__isnull=False
    )
    written = Q(status=ExtractionStatus.APPLIED, graph_version__isnull=False) & ~Exists(redone)
    return (
        ChangeSet.objects.filter(undoes=original)
        .filter(Q(status=ExtractionStatus.REVIEW) | written)
        .order_by("-created_at", "-id")
        .first()
    )


def curation_undo(*, principal: Principal, change_set_id: object) -> ChangeSet:
    """Propose the inverse of an applied change set (its applied items undone, last first) as a new
    curation change set that ``undoes`` it, reviewed like any other. ``NothingToUndo`` when it has
    no applied item, when one of them has no inverse, or when it is undone already or an undo of it
    waits for review (``_undo_standing``: two undos of one set would undo it twice)."""
    original = change_set_get(principal=principal, change_set_id=change_set_id)
    project_get(principal=principal, project_ref=original.project_id, min_role=Role.EDITOR)
    if original.status != ExtractionStatus.APPLIED:
        raise NothingToUndo(f"this change set is {original.status}: only an applied one can be undone")
    if (undo := _undo_standing(original)) is not None:
        raise NothingToUndo(f"this change set is undone already, or its undo waits for review: {undo.id}")
    items = list(original.items.filter(status="applied").order_by("-ordinal"))
    try:
        inverse = change_set_inverse(items)
    except ValueError as exc:
        raise NothingToUndo(str(exc)) from None
    if not inverse:
        raise NothingToUndo("this change set applied no change: nothing to undo")
    what = original.summary or (original.document.name if original.document else str(original.id))
    return curation_propose(
        principal=principal,
        project_id=original.project_id,
        changes=inverse,
        summary=f"Undo: {what}"[:MAX_SUMMARY],
        undoes=original,
    )

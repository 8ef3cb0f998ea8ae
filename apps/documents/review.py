"""A change set's review (issue 26 item 3): a member reads it, an editor or owner decides its items,
and the approved ones are written through the write services (one graph version bump per
decision, one audit row per change naming its document and passage).

A change set of another kind than an extraction (a curation change set, #51) is decided by the
decider its app registers at start-up (``change_set_decider_register``, from
``CurationConfig.ready``): this app sits beneath it and never imports it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Protocol

from django.db import transaction
from django.utils import timezone

from apps.core.errors import NotFound, ServiceError
from apps.core.inputs import InvalidInput, input_check
from apps.documents.models import ChangeSet, ChangeSetItem, ChangeSetKind, ExtractionStatus
from apps.graph_tools.importer import MAX_NAME, MAX_TYPE
from apps.graph_tools.models import ChangeAuthority, GraphObject
from apps.graph_tools.names import ALIASES_PROPERTY, aliases_with, same_name
from apps.graph_tools.registry import WriteAuthorization
from apps.graph_tools.write_plans import CreateEntityArgs, CreateRelationshipArgs, UpdateEntityArgs
from apps.graph_tools.write_sets import SetStep, write_apply_set
from apps.projects.models import Role
from apps.projects.selectors import Principal, parse_uuid, project_get


class ChangeSetNotFound(NotFound):
    code = "change_set_not_found"


class ChangeSetNotPending(ServiceError):
    status = 409
    code = "change_set_not_pending"


def change_set_get(*, principal: Principal, change_set_id: object) -> ChangeSet:
    """A change set of a project the principal is a member of."""
    found = parse_uuid(change_set_id)
    change_set = (
        ChangeSet.objects.filter(id=found).select_related("document", "requested_by").first()
        if found
        else None
    )
    if change_set is None:
        raise ChangeSetNotFound("no such change set")
    try:
        project_get(principal=principal, project_ref=change_set.project_id)
    except NotFound:
        raise ChangeSetNotFound("no such change set") from None
    return change_set


def _edit(values: dict[str, Any], edit: dict[str, Any]) -> dict[str, Any]:
    out = dict(values)
    for field, limit in (("name", MAX_NAME), ("type", MAX_TYPE)):
        if field in edit:
            value = edit[field]
            input_check(value, field=f"edits.{field}")
            if not isinstance(value, str) or not value.strip() or len(value) > limit:
                raise InvalidInput(
                    f"edits: {field} must be a string of 1 to {limit} characters", field=f"edits.{field}"
                )
            out[field] = " ".join(value.split())
    return out


class ChangeSetDecider(Protocol):
    def __call__(
        self,
        *,
        principal: Principal,
        change_set: ChangeSet,
        approve: list[int] | None,
        reject: list[int],
        edits: dict[int, dict[str, Any]],
    ) -> None: ...


_DECIDERS: dict[str, ChangeSetDecider] = {}


def change_set_decider_register(kind: str, decider: ChangeSetDecider) -> None:
    """Let the app of change sets of ``kind`` decide them (once, at start-up)."""
    _DECIDERS[kind] = decider


def change_set_decide(
    *,
    principal: Principal,
    change_set_id: object,
    approve: list[int] | None,
    reject: list[int],
    edits: dict[int, dict[str, Any]],
) -> ChangeSet:
    """Decide items of a change set in review as an editor or owner: ``approve`` None approves
    every pending item; the approved are written in one transaction with one graph version bump."""
    change_set = change_set_get(principal=principal, change_set_id=change_set_id)
    project_get(principal=principal, project_ref=change_set.project_id, min_role=Role.EDITOR)
    if change_set.kind != ChangeSetKind.EXTRACTION:
        decider = _DECIDERS.get(change_set.kind)
        if decider is None:
            raise ServiceError(f"change sets of kind {change_set.kind!r} cannot be decided here")
        decider(principal=principal, change_set=change_set, approve=approve, reject=reject, edits=edits)
        change_set.refresh_from_db()
        return change_set
    change_set_apply(
        change_set_id=change_set.id, approve=approve, reject=reject, edits=edits, user_id=principal.user_id
    )
    change_set.refresh_from_db()
    return change_set


def change_set_apply(
    *,
    change_set_id: uuid.UUID,
    approve: list[int] | None,
    reject: list[int],
    edits: dict[int, dict[str, Any]],
    user_id: int | None,
    auto: bool = False,
) -> int | None:
    """Apply a decision (see ``change_set_decide``); return the graph version it made, or None.

    An approved ``merge_entity`` creates nothing (the mention is the existing entity) but keeps the
    mention's name among the entity's aliases; a rejected one, like a rejected ``link_entity``,
    leaves its relationships without an end. A relationship
    approved while an end still waits for a decision stays pending.
    """
    with transaction.atomic():
        change_set = ChangeSet.objects.select_for_update().get(id=change_set_id)
        if change_set.status != ExtractionStatus.REVIEW:
            raise ChangeSetNotPending(f"this change set is {change_set.status}: nothing to decide")
        items = list(ChangeSetItem.objects.filter(change_set=change_set).order_by("ordinal"))
        by_ordinal = {i.ordinal: i for i in items}
        chosen = decision_mark(items, approve=approve, reject=reject, edits=edits)
        entity_steps, relationship_steps = _steps(change_set, items, chosen, by_ordinal)
        authorization = WriteAuthorization(
            via=ChangeAuthority.EXTRACTION_AUTO if auto else ChangeAuthority.EXTRACTION, user_id=user_id
        )
        version = write_apply_set(
            project_id=change_set.project_id,
            steps=entity_steps + [step for _, step in relationship_steps],
            authorization=authorization,
        )
        _relationship_outcomes(relationship_steps, by_ordinal)
        for item in items:
            item.save(update_fields=["status", "values", "result", "entity_id"])
        if not ChangeSetItem.objects.filter(change_set=change_set, status="pending").exists():
            change_set.status = ExtractionStatus.APPLIED
        change_set.decided_by_id, change_set.decided_at = user_id, timezone.now()
        if version is not None:
            change_set.graph_version = version
        change_set.save()
    return version


def decision_mark(
    items: list[ChangeSetItem],
    *,
    approve: list[int] | None,
    reject: list[int],
    edits: dict[int, dict[str, Any]],
) -> set[int]:
    """Mark the decision on ``items``: apply the edits and rejections to ``items``; the ids of the items to write (all pending ones
    when ``approve`` is None). An id not of this change set is an ``invalid_request``."""
    by_id = {i.id: i for i in items}
    unknown = [n for n in [*(approve or []), *reject, *edits] if n not in by_id]
    if unknown:
        raise ServiceError(f"no item {unknown[0]} in this change set", code="invalid_request")
    for item_id, edit in edits.items():
        item = by_id[item_id]
        if item.action.endswith("_entity") and item.status == "pending":
            item.values = _edit(item.values, edit)
    for item_id in reject:
        if by_id[item_id].status in ("pending", "linked"):
            by_id[item_id].status = "rejected"
    return {i.id for i in items if i.status == "pending"} if approve is None else set(approve) - set(reject)


def _steps(
    change_set: ChangeSet, items: list[ChangeSetItem], chosen: set[int], by_ordinal: dict[int, ChangeSetItem]
) -> tuple[list[SetStep], list[tuple[ChangeSetItem, SetStep]]]:
    """The writes of the chosen items: entities first (each followed by a step noting its id on the
    item), then relationships, whose ends are read when their step runs."""

    def entity_of(ordinal: int) -> uuid.UUID | None:
        end = by_ordinal[ordinal]
        return end.entity_id if end.status in ("linked", "merged", "applied") else None

    entity_steps: list[SetStep] = []
    relationship_steps: list[tuple[ChangeSetItem, SetStep]] = []
    for item in items:
        if item.id not in chosen or item.status != "pending":
            continue
        if item.action == "merge_entity":
            item.status = "merged"
            entity_steps += _alias_steps(change_set, item)
        elif item.action == "create_entity":
            args = CreateEntityArgs(
                key=item.values["key"],
                type=item.values["type"],
                name=item.values["name"],
                description=item.values.get("description", ""),
            )
            step = SetStep("create_entity", _given(args), change_set.document_id, item.passage_id)
            entity_steps += [step, SetStep("create_entity", _noter(item, step))]
        elif item.action == "create_relationship":

            def build(item: ChangeSetItem = item) -> CreateRelationshipArgs | None:
                src, dst = entity_of(item.values["source"]), entity_of(item.values["target"])
                if src is None or dst is None:
                    return None
                return CreateRelationshipArgs(src=str(src), type=item.values["type"], dst=str(dst))

            relationship_steps.append(
                (item, SetStep("create_relationship", build, change_set.document_id, item.passage_id))
            )
    return entity_steps, relationship_steps


def _alias_steps(change_set: ChangeSet, item: ChangeSetItem) -> list[SetStep]:
    """The step that keeps a merged mention's name among its entity's aliases (then a search or a
    later extraction finds the entity by that name). A linked mention needs none: it has the
    entity's name, or one of its aliases, already (``resolution.entity_match``)."""
    name, entity_id = str(item.values.get("name", "")), item.entity_id
    if entity_id is None or same_name(name, str(item.evidence.get("entity", {}).get("name", ""))):
        return []

    def build() -> UpdateEntityArgs | None:
        found = (
            GraphObject.objects.filter(project_id=change_set.project_id, id=entity_id)
            .values_list("name", "properties")
            .first()
        )
        if found is None:
            return None
        aliases = aliases_with(found[1] or {}, name, found[0])
        if aliases is None:
            return None
        return UpdateEntityArgs(entity_id=str(entity_id), properties={ALIASES_PROPERTY: aliases})

    return [SetStep("update_entity", build, change_set.document_id, item.passage_id)]


def _relationship_outcomes(
    relationship_steps: list[tuple[ChangeSetItem, SetStep]], by_ordinal: dict[int, ChangeSetItem]
) -> None:
    for item, step in relationship_steps:
        if step.error is not None:
            item.status, item.result = "failed", step.error
        elif step.result is not None:
            item.status, item.result = "applied", step.result
        else:
            ends = [by_ordinal[item.values[k]] for k in ("source", "target")]
            if any(end.status in ("rejected", "failed") for end in ends):
                item.status = "failed"
                item.result = {"error": "an end of this relationship was rejected", "code": "end_rejected"}


def _given(args: CreateEntityArgs) -> Callable[[], CreateEntityArgs]:
    return lambda: args


def _noter(item: ChangeSetItem, step: SetStep) -> Any:
    """A step that writes nothing: it notes the entity ``step`` created (or its failure) on ``item``,
    so the relationship steps after it in the same set find the entity's id."""

    def note() -> None:
        if step.error is not None:
            item.status, item.result = "failed", step.error
        elif step.result is not None and step.result.get("after"):
            item.status, item.result = "applied", step.result
            item.entity_id = uuid.UUID(step.result["after"]["id"])
        return None

    return note

"""Reads of curation (#51): a project's change sets of both kinds, and the merges waiting for review."""

from __future__ import annotations

import uuid
from collections.abc import Collection

from django.db.models import Q, QuerySet

from apps.core.errors import ServiceError
from apps.documents.models import ChangeSet, ChangeSetItem, ChangeSetKind, ExtractionStatus
from apps.graph_tools.models import GraphObject
from apps.projects.selectors import Principal, parse_uuid, project_get


def change_set_list(
    *, principal: Principal, project_ref: object, kind: str | None = None, status: str | None = None
) -> QuerySet[ChangeSet]:
    """A project's change sets, newest first, of one kind and/or status (the caller pages them)."""
    project = project_get(principal=principal, project_ref=project_ref)
    if kind and kind not in ChangeSetKind.values:
        raise ServiceError(f"kind must be one of: {', '.join(ChangeSetKind.values)}", code="invalid_request")
    if status and status not in ExtractionStatus.values:
        raise ServiceError(
            f"status must be one of: {', '.join(ExtractionStatus.values)}", code="invalid_request"
        )
    qs = ChangeSet.objects.filter(project=project).select_related("document", "requested_by")
    if kind:
        qs = qs.filter(kind=kind)
    if status:
        qs = qs.filter(status=status)
    return qs.prefetch_related("items").order_by("-created_at", "id")


def entity_ids_named(*, project_id: uuid.UUID, refs: Collection[str]) -> dict[str, str]:
    """The id of the project's entity each of ``refs`` names, as the write tools read an entity
    argument (its id, else its key; surrounding spaces aside); a ref that names none is left out."""
    wanted = {ref: ref.strip() for ref in refs if isinstance(ref, str) and ref.strip()}
    if not wanted:
        return {}
    ids = {u for u in map(parse_uuid, wanted.values()) if u is not None}
    rows = list(
        GraphObject.objects.filter(
            Q(key__in=set(wanted.values())) | Q(id__in=ids), project_id=project_id
        ).values_list("id", "key")
    )
    by_id = {entity_id: str(entity_id) for entity_id, _ in rows}
    by_key = {key: str(entity_id) for entity_id, key in rows}
    named = {}
    for ref, text in wanted.items():
        as_id = parse_uuid(text)
        found = (by_id.get(as_id) if as_id is not None else None) or by_key.get(text)
        if found is not None:
            named[ref] = found
    return named


def merges_pending(*, project_id: uuid.UUID) -> dict[frozenset[str], str]:
    """The pairs of entities (their ids, either way round) that a curation change set waiting for
    review proposes to merge, each with the id of the first such change set.

    Read from the pending ``merge_entities`` items of the project's curation change sets in review:
    as many as members proposed and nobody decided yet, whatever the graph's size."""
    items = list(
        ChangeSetItem.objects.filter(
            change_set__project_id=project_id,
            change_set__kind=ChangeSetKind.CURATION,
            change_set__status=ExtractionStatus.REVIEW,
            action="merge_entities",
            status="pending",
        )
        .order_by("change_set__created_at", "change_set_id", "ordinal")
        .values_list("change_set_id", "values")
    )
    refs = [values[side] for _, values in items for side in ("keep", "merge")]
    named = entity_ids_named(project_id=project_id, refs=refs)
    pending: dict[frozenset[str], str] = {}
    for change_set_id, values in items:
        keep, merge = named.get(values["keep"]), named.get(values["merge"])
        if keep is not None and merge is not None and keep != merge:
            pending.setdefault(frozenset((keep, merge)), str(change_set_id))
    return pending

"""A document's change set (issue 26 item 3): entity resolution of what extraction found, the items
it proposes, and the review that writes the approved ones through the write services (one graph
version bump per decision, one audit row per change naming its document and passage)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.core.errors import NotFound, ServiceError
from apps.core.inputs import InvalidInput, input_check
from apps.documents.models import ChangeSet, ChangeSetItem, ExtractionSettings, ExtractionStatus, Passage
from apps.documents.resolution import entity_match, key_for, normalised_name
from apps.graph_tools.embeddings import get_embedder
from apps.graph_tools.importer import MAX_NAME, MAX_TYPE
from apps.graph_tools.models import ChangeAuthority, GraphObject
from apps.graph_tools.names import ALIASES_PROPERTY, aliases_with, same_name
from apps.graph_tools.registry import WriteAuthorization
from apps.graph_tools.selectors import graph_vocabulary
from apps.graph_tools.write_plans import CreateEntityArgs, CreateRelationshipArgs, UpdateEntityArgs
from apps.graph_tools.writes import SetStep, write_apply_set
from apps.projects.models import Role
from apps.projects.selectors import Principal, parse_uuid, project_get


class ChangeSetNotFound(NotFound):
    code = "change_set_not_found"


class ChangeSetNotPending(ServiceError):
    status = 409
    code = "change_set_not_pending"


# --- the schema the model answers under -----------------------------------------------------------


def change_set_build(change_set: ChangeSet, *, embedder: Any = None) -> list[ChangeSetItem]:
    """The proposed changes of a finished extraction: one entity item per distinct mention (link,
    merge or create, with its evidence), then one item per distinct relationship between them;
    each names the passage it was first found in. A relationship's end the model named only there
    becomes a mention of the one type that end has in the graph (beside the other end's type); a
    relationship written against the direction the graph's types give is turned round, and one
    joining types that the graph's relationships of its type never join is left out (unless the
    project allows new types). A name the passages give different types has the type that most
    passages and most of its relationships (as written) agree on (``_agreed_types``)."""
    passages = {
        str(p.id): p
        for p in Passage.objects.filter(id__in=change_set.passage_ids, extraction_state="done").defer(
            "search_vector"
        )
    }
    builder = _Builder(change_set, embedder)
    ordered = [passages[pid] for pid in change_set.passage_ids if pid in passages]
    agreed = _agreed_types([p.extracted or {} for p in ordered], builder.ends)
    for passage in ordered:
        for entity in (passage.extracted or {}).get("entities", []):
            type_ = agreed.get(normalised_name(entity["name"]), entity["type"])
            builder.mention(passage, entity["name"], type_, entity.get("description", ""))
    for passage in ordered:
        for rel in (passage.extracted or {}).get("relationships", []):
            builder.relationship(passage, rel)
    return builder.items


def _agreed_types(answers: list[dict[str, Any]], ends: dict[str, set[tuple[str, str]]]) -> dict[str, str]:
    """The type of each name (normalised) that the passages' answers typed differently: the one
    with the most votes, a vote being a passage that gives it that type or a relationship of it,
    as the model wrote it, whose types the graph's relationships of its type join with that type
    (and any type given to the other end); on a tie, the first given."""
    given: dict[str, list[str]] = {}
    for answer in answers:
        for entity in answer.get("entities", []):
            given.setdefault(normalised_name(entity["name"]), []).append(entity["type"])
    mixed = {name for name, types in given.items() if len(set(types)) > 1}
    if not mixed:
        return {}
    votes: dict[tuple[str, str], int] = {}
    for name in mixed:
        for type_ in given[name]:
            votes[(name, type_)] = votes.get((name, type_), 0) + 1
    for answer in answers:
        for rel in answer.get("relationships", []):
            _relationship_votes(rel, ends.get(rel["type"], set()), given, mixed, votes)
    agreed: dict[str, str] = {}
    for name in mixed:
        # max keeps the first of equals: the type given first wins a tie.
        agreed[name] = max(dict.fromkeys(given[name]), key=lambda type_: votes[(name, type_)])
    return agreed


def _relationship_votes(
    rel: dict[str, str],
    pairs: set[tuple[str, str]],
    given: dict[str, list[str]],
    mixed: set[str],
    votes: dict[tuple[str, str], int],
) -> None:
    """Count the votes of one relationship for the types of its ends (``_agreed_types``)."""
    source, target = normalised_name(rel["source"]), normalised_name(rel["target"])
    for name, side, other in ((source, 0, target), (target, 1, source)):
        if name not in mixed:
            continue
        for type_ in dict.fromkeys(given[name]):
            if any(pair[side] == type_ and pair[1 - side] in given.get(other, ()) for pair in pairs):
                votes[(name, type_)] += 1


class _Builder:
    """A change set's items as they are found: mentions by normalised name, then relationships."""

    def __init__(self, change_set: ChangeSet, embedder: Any) -> None:
        self.change_set, self.embedder = change_set, embedder
        self.project_id = change_set.project_id
        self.items: list[ChangeSetItem] = []
        self.by_name: dict[str, ChangeSetItem] = {}
        self.taken: set[str] = set()
        self.seen: set[tuple[int, str, int]] = set()
        # The ends each relationship type joins in the graph: what a relationship's end is when the
        # model named it only there, and which way round the relationship goes.
        self.ends: dict[str, set[tuple[str, str]]] = {}
        vocabulary = graph_vocabulary(project_id=self.project_id)
        for type_, src_type, dst_type in vocabulary.relationships:
            self.ends.setdefault(type_, set()).add((src_type, dst_type))
        # Whether the extraction may bring new types (then a new pair of types is no mistake).
        self.new_types = (
            not vocabulary.entity_types
            or ExtractionSettings.objects.filter(project_id=self.project_id, allow_new_types=True).exists()
        )

    def mention(self, passage: Passage, name: str, type_: str, description: str) -> ChangeSetItem | None:
        norm = normalised_name(name)
        if not norm:
            return None
        if norm in self.by_name:
            return self.by_name[norm]
        action, evidence = entity_match(
            project_id=self.project_id, name=name, type_=type_, embedder=self.embedder
        )
        values = {"name": name, "type": type_, "description": description}
        target = None
        if action == "create":
            values["key"] = key_for(self.project_id, type_, name, self.taken)
        else:
            target = uuid.UUID(evidence["entity"]["id"])
        item = ChangeSetItem(
            change_set=self.change_set,
            passage=passage,
            ordinal=len(self.items),
            action=f"{action}_entity",
            values=values,
            entity_id=target,
            evidence=evidence,
            status="linked" if action == "link" else "pending",
        )
        self.items.append(item)
        self.by_name[norm] = item
        return item

    def end_of(
        self, passage: Passage, name: str, rel_type: str, side: int, other: ChangeSetItem | None = None
    ) -> ChangeSetItem | None:
        """The mention a relationship's end names; one the model named only there becomes a mention
        of the one type the graph's relationships of this type give that end (next to ``other``'s
        type, when the other end is known), or None when that is not one type."""
        found = self.by_name.get(normalised_name(name))
        if found is not None:
            return found
        pairs = self.ends.get(rel_type, set())
        if other is not None:
            pairs = {pair for pair in pairs if pair[1 - side] == other.values["type"]} or pairs
        types = {pair[side] for pair in pairs}
        return self.mention(passage, name, types.pop(), "") if len(types) == 1 else None

    def relationship(self, passage: Passage, rel: dict[str, str]) -> None:
        src = self.by_name.get(normalised_name(rel["source"]))
        dst = self.end_of(passage, rel["target"], rel["type"], 1, src)
        src = src or self.end_of(passage, rel["source"], rel["type"], 0, dst)
        if src is None or dst is None or src is dst:
            return
        pairs = self.ends.get(rel["type"], set())
        given = (src.values["type"], dst.values["type"])
        if pairs and given not in pairs and given[::-1] in pairs:  # written the other way round
            src, dst = dst, src
        elif pairs and given not in pairs and not self.new_types:
            return  # the graph's relationships of this type never join these types
        triple = (src.ordinal, rel["type"], dst.ordinal)
        if triple in self.seen:
            return
        self.seen.add(triple)
        if (
            src.entity_id
            and dst.entity_id
            and _relationship_exists(src.entity_id, rel["type"], dst.entity_id)
        ):
            return
        self.items.append(
            ChangeSetItem(
                change_set=self.change_set,
                passage=passage,
                ordinal=len(self.items),
                action="create_relationship",
                values={"type": rel["type"], "source": src.ordinal, "target": dst.ordinal},
            )
        )


def _relationship_exists(src: uuid.UUID, type_: str, dst: uuid.UUID) -> bool:
    from apps.graph_tools.models import GraphRelationship

    return GraphRelationship.objects.filter(src_id=src, type=type_, dst_id=dst).exists()


def change_set_maybe_finish(*, change_set_id: uuid.UUID) -> bool:
    """Once no passage of a running change set waits, build its items (status ``review``, or
    ``empty``); an owner's upload with the project's auto-approval is applied at once. True when
    it finished now."""
    with transaction.atomic():
        change_set = ChangeSet.objects.select_for_update().filter(id=change_set_id).first()
        if change_set is None or change_set.status != ExtractionStatus.RUNNING:
            return False
        if Passage.objects.filter(id__in=change_set.passage_ids, extraction_state="pending").exists():
            return False
        items = change_set_build(change_set, embedder=_embedder_or_none())
        ChangeSetItem.objects.bulk_create(items)
        writable = any(i.status == "pending" for i in items)
        change_set.status = ExtractionStatus.REVIEW if writable else ExtractionStatus.EMPTY
        change_set.save(update_fields=["status", "updated_at"])
    if writable and change_set.auto_approve:
        change_set_apply(
            change_set_id=change_set.id,
            approve=None,
            reject=[],
            edits={},
            user_id=change_set.requested_by_id,
            auto=True,
        )
    return True


def _embedder_or_none() -> Any:
    try:
        return get_embedder()
    except Exception:  # no embedding model here: names decide alone
        return None


# --- review and apply ----------------------------------------------------------------------------


def change_set_get(*, principal: Principal, change_set_id: object) -> ChangeSet:
    """A change set of a project the principal is a member of."""
    found = parse_uuid(change_set_id)
    change_set = ChangeSet.objects.filter(id=found).select_related("document").first() if found else None
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
        chosen = _decision_mark(items, approve=approve, reject=reject, edits=edits)
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


def _decision_mark(
    items: list[ChangeSetItem],
    *,
    approve: list[int] | None,
    reject: list[int],
    edits: dict[int, dict[str, Any]],
) -> set[int]:
    """Apply the edits and rejections to ``items``; the ids of the items to write (all pending ones
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

"""Extraction as a proposal (issue 26 item 3), the graph's side: which passages to ask, the JSON
Schema the model answers under, the queue's claims, retries and progress, entity resolution, the
change set and its review, written through the write services.

The model itself is asked by ``apps/agents/extraction.py`` (only agents talks to models), which
registers its step with the one background worker (``graph_tools.jobs``): the worker embeds what
waits, then extracts what waits, one passage at a time.

A change set covers one document's passages not in an earlier change set: a re-uploaded document
with one changed paragraph proposes only what that paragraph says.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from apps.core.errors import NotFound, ServiceError
from apps.core.inputs import input_check
from apps.graph_tools.embeddings import get_embedder
from apps.graph_tools.models import (
    ChangeAuthority,
    ChangeSet,
    ChangeSetItem,
    Document,
    ExtractionSettings,
    ExtractionStatus,
    GraphObject,
    Passage,
)
from apps.graph_tools.registry import WriteAuthorization
from apps.graph_tools.search import vector_literal
from apps.graph_tools.selectors import graph_vocabulary
from apps.graph_tools.write_plans import CreateEntityArgs, CreateRelationshipArgs
from apps.graph_tools.writes import SetStep, write_apply_set
from apps.projects.models import Role
from apps.projects.selectors import Principal, parse_uuid, project_get

# A passage whose model call failed this many times is marked failed and skipped.
EXTRACTION_ATTEMPTS = 3
# The first retry waits this long, each later one twice as long (a rate limit's usual cure).
BACKOFF_SECONDS = 5.0
# A claimed passage is not claimed again for this long: longer than a model call may take. A
# worker that dies leaves it to the next one after the lease.
LEASE_SECONDS = 300
# Entity resolution: names at least this similar (pg_trgm) to an existing entity's of the same type
# are proposed as that entity ("merge"); vectors at least this close (cosine) too.
TRIGRAM_MERGE = 0.6
EMBEDDING_MERGE = 0.93
MAX_MENTIONS = 50  # entities and relationships read from one passage's answer


class ChangeSetNotFound(NotFound):
    code = "change_set_not_found"


class ChangeSetNotPending(ServiceError):
    status = 409
    code = "change_set_not_pending"


# --- the schema the model answers under -----------------------------------------------------------


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


def extraction_output_clean(output: Any, spec: ExtractionSpec) -> dict[str, list[dict[str, str]]]:
    """The model's answer as the schema allows it: unknown types (when new ones are not allowed),
    blank names and anything malformed are left out."""
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
    return {"entities": entities, "relationships": relationships}


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


def normalised_name(name: str) -> str:
    """A name for comparing: case, spacing, edge punctuation and a leading "the" aside."""
    text = " ".join(name.casefold().split()).strip(" .,;:!?\"'()[]")
    return re.sub(r"^the ", "", text)


def _entity_brief(row: Any) -> dict[str, Any]:
    return {"id": str(row[0]), "name": row[1], "type": row[2], "key": row[3]}


def entity_match(
    *, project_id: uuid.UUID, name: str, type_: str, embedder: Any = None
) -> tuple[str, dict[str, Any]]:
    """How a mention relates to the project's entities: ("link", evidence) for the same name,
    ("merge", evidence) for a similar name or a close vector of the same type, ("create", {})."""
    wanted = normalised_name(name)
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT id, name, type, key FROM kb.graph_objects
               WHERE project_id = %s AND lower(name) = lower(%s) ORDER BY (type = %s) DESC LIMIT 5""",
            [project_id, name, type_],
        )
        rows = cursor.fetchall()
        cursor.execute(
            """SELECT id, name, type, key FROM kb.graph_objects
               WHERE project_id = %s AND type = %s AND lower(name) LIKE %s LIMIT 20""",
            [project_id, type_, "%" + wanted.replace("%", "").replace("_", "")[:100] + "%"],
        )
        rows += cursor.fetchall()
    for row in rows:
        if normalised_name(row[1]) == wanted:
            return "link", {"method": "name", "entity": _entity_brief(row)}
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT id, name, type, key, similarity(name, %(n)s) AS s FROM kb.graph_objects
               WHERE project_id = %(p)s AND type = %(t)s AND similarity(name, %(n)s) >= %(min)s
               ORDER BY s DESC LIMIT 1""",
            {"p": project_id, "t": type_, "n": name, "min": TRIGRAM_MERGE},
        )
        row = cursor.fetchone()
    if row is not None:
        return "merge", {"method": "trigram", "score": round(float(row[4]), 3), "entity": _entity_brief(row)}
    if embedder is not None:
        vector = embedder.embed_query(f"{name} ({type_})")
        with connection.cursor() as cursor:
            cursor.execute(
                """SELECT o.id, o.name, o.type, o.key, 1 - (e.embedding <=> %(v)s::vector) AS s
                   FROM kb.graph_object_embeddings e JOIN kb.graph_objects o ON o.id = e.object_id
                   WHERE e.project_id = %(p)s AND e.model = %(m)s AND o.type = %(t)s
                   ORDER BY e.embedding <=> %(v)s::vector LIMIT 1""",
                {"p": project_id, "m": embedder.name, "t": type_, "v": vector_literal(vector)},
            )
            row = cursor.fetchone()
        if row is not None and float(row[4]) >= EMBEDDING_MERGE:
            return "merge", {
                "method": "embedding",
                "score": round(float(row[4]), 3),
                "entity": _entity_brief(row),
            }
    return "create", {}


def _key_for(project_id: uuid.UUID, type_: str, name: str, taken: set[str]) -> str:
    base = f"{type_.lower()}:{re.sub(r'[^a-z0-9]+', '-', name.casefold()).strip('-') or 'entity'}"[:480]
    key, n = base, 1
    while key in taken or GraphObject.objects.filter(project_id=project_id, key=key).exists():
        n += 1
        key = f"{base}-{n}"
    taken.add(key)
    return key


def change_set_build(change_set: ChangeSet, *, embedder: Any = None) -> list[ChangeSetItem]:
    """The proposed changes of a finished extraction: one entity item per distinct mention (link,
    merge or create, with its evidence), then one item per distinct relationship between them;
    each names the passage it was first found in. A relationship's end the model named only there
    becomes a mention of the one type that end has in the graph; a relationship written against
    the direction the graph's types give is turned round."""
    passages = {
        str(p.id): p
        for p in Passage.objects.filter(id__in=change_set.passage_ids, extraction_state="done").defer(
            "search_vector"
        )
    }
    items: list[ChangeSetItem] = []
    by_name: dict[str, ChangeSetItem] = {}
    taken: set[str] = set()
    project_id = change_set.project_id
    ordered = [passages[pid] for pid in change_set.passage_ids if pid in passages]
    # The ends each relationship type joins in the graph: what a relationship's end is when the model
    # named it only there, and which way round the relationship goes.
    ends: dict[str, set[tuple[str, str]]] = {}
    for type_, src_type, dst_type in graph_vocabulary(project_id=project_id).relationships:
        ends.setdefault(type_, set()).add((src_type, dst_type))

    def mention(passage: Passage, name: str, type_: str, description: str) -> ChangeSetItem | None:
        norm = normalised_name(name)
        if not norm:
            return None
        if norm in by_name:
            return by_name[norm]
        action, evidence = entity_match(project_id=project_id, name=name, type_=type_, embedder=embedder)
        values = {"name": name, "type": type_, "description": description}
        target = None
        if action == "create":
            values["key"] = _key_for(project_id, type_, name, taken)
        else:
            target = uuid.UUID(evidence["entity"]["id"])
        item = ChangeSetItem(
            change_set=change_set,
            passage=passage,
            ordinal=len(items),
            action=f"{action}_entity",
            values=values,
            entity_id=target,
            evidence=evidence,
            status="linked" if action == "link" else "pending",
        )
        items.append(item)
        by_name[norm] = item
        return item

    def end_of(passage: Passage, name: str, rel_type: str, side: int) -> ChangeSetItem | None:
        found = by_name.get(normalised_name(name))
        if found is not None:
            return found
        types = {pair[side] for pair in ends.get(rel_type, ())}
        return mention(passage, name, types.pop(), "") if len(types) == 1 else None

    for passage in ordered:
        for entity in (passage.extracted or {}).get("entities", []):
            mention(passage, entity["name"], entity["type"], entity.get("description", ""))
    seen: set[tuple[int, str, int]] = set()
    for passage in ordered:
        for rel in (passage.extracted or {}).get("relationships", []):
            src = end_of(passage, rel["source"], rel["type"], 0)
            dst = end_of(passage, rel["target"], rel["type"], 1)
            if src is None or dst is None or src is dst:
                continue
            pairs = ends.get(rel["type"], set())
            given = (src.values["type"], dst.values["type"])
            if pairs and given not in pairs and given[::-1] in pairs:  # written the other way round
                src, dst = dst, src
            triple = (src.ordinal, rel["type"], dst.ordinal)
            if triple in seen:
                continue
            seen.add(triple)
            if (
                src.entity_id
                and dst.entity_id
                and _relationship_exists(src.entity_id, rel["type"], dst.entity_id)
            ):
                continue
            items.append(
                ChangeSetItem(
                    change_set=change_set,
                    passage=passage,
                    ordinal=len(items),
                    action="create_relationship",
                    values={"type": rel["type"], "source": src.ordinal, "target": dst.ordinal},
                )
            )
    return items


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
    for field in ("name", "type"):
        if field in edit:
            value = edit[field]
            input_check(value, field=f"edits.{field}")
            if (
                not isinstance(value, str)
                or not value.strip()
                or len(value) > (512 if field == "name" else 128)
            ):
                raise ServiceError(f"edits: {field} must be a non-empty string", code="invalid_request")
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

    An approved ``merge_entity`` writes nothing (the mention is the existing entity); a rejected
    one, like a rejected ``link_entity``, leaves its relationships without an end. A relationship
    approved while an end still waits for a decision stays pending.
    """
    with transaction.atomic():
        change_set = ChangeSet.objects.select_for_update().get(id=change_set_id)
        if change_set.status != ExtractionStatus.REVIEW:
            raise ChangeSetNotPending(f"this change set is {change_set.status}: nothing to decide")
        items = list(ChangeSetItem.objects.filter(change_set=change_set).order_by("ordinal"))
        by_ordinal = {i.ordinal: i for i in items}
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
        chosen = (
            {i.id for i in items if i.status == "pending"} if approve is None else set(approve) - set(reject)
        )

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
        authorization = WriteAuthorization(
            via=ChangeAuthority.EXTRACTION_AUTO if auto else ChangeAuthority.EXTRACTION, user_id=user_id
        )
        version = write_apply_set(
            project_id=change_set.project_id,
            steps=entity_steps + [step for _, step in relationship_steps],
            authorization=authorization,
        )
        for item, step in relationship_steps:
            if step.error is not None:
                item.status, item.result = "failed", step.error
            elif step.result is not None:
                item.status, item.result = "applied", step.result
            else:
                ends = [by_ordinal[item.values[k]] for k in ("source", "target")]
                if any(end.status in ("rejected", "failed") for end in ends):
                    item.status = "failed"
                    item.result = {
                        "error": "an end of this relationship was rejected",
                        "code": "end_rejected",
                    }
        for item in items:
            item.save(update_fields=["status", "values", "result", "entity_id"])
        if not ChangeSetItem.objects.filter(change_set=change_set, status="pending").exists():
            change_set.status = ExtractionStatus.APPLIED
        change_set.decided_by_id, change_set.decided_at = user_id, timezone.now()
        if version is not None:
            change_set.graph_version = version
        change_set.save()
    return version


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


# --- for the transports --------------------------------------------------------------------------


def extraction_model() -> str:
    """The project's model: the one plain conversations use (``KGCHAT_MODEL`` overrides it)."""
    from django.conf import settings

    return (settings.KGCHAT_MODEL or settings.KGCHAT_CHAT_MODEL).strip()


def extraction_start_as_member(
    *, principal: Principal, project_ref: object, document_id: object
) -> ChangeSet:
    """Start (or return the running) extraction of a document, as an editor or owner."""
    from apps.graph_tools.documents.selectors import document_of_project

    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.EDITOR)
    document = document_of_project(project_id=project.id, document_id=document_id)
    return extraction_start(document=document, model=extraction_model(), user_id=principal.user_id)


def extraction_start_as_operator(*, document: Document) -> ChangeSet:
    return extraction_start(document=document, model=extraction_model(), user_id=None)


def change_set_latest(*, principal: Principal, project_ref: object, document_id: object) -> ChangeSet:
    """The newest change set of a document a member may see (``ChangeSetNotFound``: none yet)."""
    from apps.graph_tools.documents.selectors import document_of_project

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

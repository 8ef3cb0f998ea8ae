"""The write tools' work: plan a change (its human-readable diff, nothing written) and apply it.

``write_plan`` reads only: it is what an approval shows before anyone decides. ``write_apply``
plans again inside one transaction that holds the project's write turn (the lock imports take),
then writes the rows, bumps the graph version once and records one ``GraphChange`` per entity or
relationship changed, all or nothing. Type counts and full text follow by themselves (triggers and
a generated column); a created or renamed entity waits for the background embedding worker, as an
import does.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.graph_tools.errors import (
    EntityExists,
    RelationshipExists,
)
from apps.graph_tools.importer import project_write_turn
from apps.graph_tools.merges import (
    MergeEntitiesArgs,
    UnmergeEntitiesArgs,
    apply_merge_entities,
    apply_unmerge_entities,
    plan_merge_entities,
    plan_unmerge_entities,
)
from apps.graph_tools.models import (
    IMPORT_ACTIONS,
    GraphChange,
    GraphObject,
    GraphObjectEmbedding,
    GraphRelationship,
    GraphWriteKey,
)
from apps.graph_tools.ontology.checks import ontology_enforce
from apps.graph_tools.registry import ToolArgs, WriteAuthorization
from apps.graph_tools.restores import RestoreEntityArgs, apply_restore_entity, plan_restore_entity
from apps.graph_tools.versions import graph_version_bump, graph_version_current
from apps.graph_tools.write_plans import (
    CreateEntityArgs,
    CreateRelationshipArgs,
    DeleteEntityArgs,
    DeleteRelationshipArgs,
    UpdateEntityArgs,
    UpdateRelationshipArgs,
    WritePlan,
    plan_create_entity,
    plan_create_relationship,
    plan_delete_entity,
    plan_delete_relationship,
    plan_update_entity,
    plan_update_relationship,
    relationship_value,
)

log = logging.getLogger("kgchat.writes")


def _change(action: str, **values: Any) -> dict[str, Any]:
    return {"action": action, **values}


def _apply_create_entity(
    project_id: uuid.UUID, args: CreateEntityArgs, plan: WritePlan
) -> list[dict[str, Any]]:
    try:
        with transaction.atomic():
            obj = GraphObject.objects.create(
                project_id=project_id,
                key=args.key,
                type=args.type,
                name=args.name,
                description=args.description,
                properties=args.properties,
            )
    except IntegrityError:
        raise EntityExists(f"an entity with key {args.key!r} already exists in this project") from None
    plan.entity_id = obj.id
    plan.after = {"id": str(obj.id), **(plan.after or {})}
    return [_change("create_entity", entity_id=obj.id, after=plan.after)]


def _apply_update_entity(
    project_id: uuid.UUID, args: UpdateEntityArgs, plan: WritePlan
) -> list[dict[str, Any]]:
    after = plan.after or {}
    assert plan.entity_id is not None
    obj = GraphObject.objects.defer("search_vector").get(project_id=project_id, id=plan.entity_id)
    fields = ["name", "type", "description", "properties", "updated_at"]
    if (obj.name, obj.type, obj.description) != (after["name"], after["type"], after["description"]):
        # The embedded text (name, type, description) changed: the background worker embeds it again.
        GraphObjectEmbedding.objects.filter(object_id=obj.id).delete()
        obj.embedding_pending = True
        fields.append("embedding_pending")
    obj.name, obj.type, obj.description = after["name"], after["type"], after["description"]
    obj.properties = after["properties"]
    obj.save(update_fields=fields)
    return [_change("update_entity", entity_id=plan.entity_id, before=plan.before, after=after)]


def _apply_delete_entity(
    project_id: uuid.UUID, args: DeleteEntityArgs, plan: WritePlan
) -> list[dict[str, Any]]:
    entity = {k: v for k, v in (plan.before or {}).items() if k != "relationships"}
    rows = [
        _change(
            "delete_relationship",
            relationship_id=r["id"],
            src_id=r["src"],
            dst_id=r["dst"],
            before=r,
        )
        for r in plan.relationships
    ]
    assert plan.entity_id is not None
    GraphObject.objects.filter(project_id=project_id, id=plan.entity_id).delete()
    return [*rows, _change("delete_entity", entity_id=plan.entity_id, before=entity)]


def _apply_create_relationship(
    project_id: uuid.UUID, args: CreateRelationshipArgs, plan: WritePlan
) -> list[dict[str, Any]]:
    assert plan.src is not None and plan.dst is not None
    try:
        with transaction.atomic():
            rel = GraphRelationship.objects.create(
                project_id=project_id,
                type=args.type,
                src_id=plan.src["id"],
                dst_id=plan.dst["id"],
                properties=args.properties,
            )
    except IntegrityError:
        raise RelationshipExists("this relationship already exists in this project") from None
    plan.after = relationship_value(rel, plan.src, plan.dst)
    return [
        _change(
            "create_relationship",
            relationship_id=rel.id,
            src_id=rel.src_id,
            dst_id=rel.dst_id,
            after=plan.after,
        )
    ]


def _apply_delete_relationship(
    project_id: uuid.UUID, args: DeleteRelationshipArgs, plan: WritePlan
) -> list[dict[str, Any]]:
    before = plan.before or {}
    GraphRelationship.objects.filter(project_id=project_id, id=before["id"]).delete()
    return [
        _change(
            "delete_relationship",
            relationship_id=before["id"],
            src_id=before["src"],
            dst_id=before["dst"],
            before=before,
        )
    ]


def _apply_update_relationship(
    project_id: uuid.UUID, args: UpdateRelationshipArgs, plan: WritePlan
) -> list[dict[str, Any]]:
    before, after = plan.before or {}, plan.after or {}
    GraphRelationship.objects.filter(project_id=project_id, id=before["id"]).update(
        properties=after["properties"], updated_at=timezone.now()
    )
    return [
        _change(
            "update_relationship",
            relationship_id=before["id"],
            src_id=before["src"],
            dst_id=before["dst"],
            before=before,
            after=after,
        )
    ]


Planner = Callable[[uuid.UUID, Any], WritePlan]
Applier = Callable[[uuid.UUID, Any, WritePlan], list[dict[str, Any]]]


@dataclass(frozen=True)
class WriteKind:
    """One graph write tool, declared once: the registry's tool (``tools.py``), the change action
    it records and its label (``models.change_actions``), the page's wording of it in an entity's
    history (``change_action_words``) and the curator agent's tools (``agents/defaults.py``) are
    all read from ``WRITE_KINDS``. Adding a write tool is its arguments and planner
    (``write_plans.py``), its applier and one entry here."""

    name: str
    label: str  # the change action's label (admin, audit)
    done: str  # how an entity's history on the page says it happened
    description: str  # what models and MCP clients read
    args_model: type[ToolArgs]
    plan: Planner
    apply: Applier
    destructive: bool = False
    # Not a tool of the registry, nor a member's to propose: only an undo's change set writes it
    # (``restores.py``); ``write_sets.write_step_args`` validates its arguments.
    internal: bool = False


WRITE_KINDS: tuple[WriteKind, ...] = (
    WriteKind(
        "create_entity",
        "Create entity",
        "created",
        "Create a new entity with a unique key, a type, a name, a description and properties.",
        CreateEntityArgs,
        plan_create_entity,
        _apply_create_entity,
    ),
    WriteKind(
        "update_entity",
        "Update entity",
        "updated",
        "Change an entity's name, type, description and/or properties (a property set to null is removed; "
        "properties not given stay as they are).",
        UpdateEntityArgs,
        plan_update_entity,
        _apply_update_entity,
        destructive=True,
    ),
    WriteKind(
        "delete_entity",
        "Delete entity",
        "deleted",
        "Delete an entity together with all its relationships.",
        DeleteEntityArgs,
        plan_delete_entity,
        _apply_delete_entity,
        destructive=True,
    ),
    WriteKind(
        "create_relationship",
        "Create relationship",
        "relationship added",
        "Create a relationship of a type from a source entity to a target entity.",
        CreateRelationshipArgs,
        plan_create_relationship,
        _apply_create_relationship,
    ),
    WriteKind(
        "update_relationship",
        "Update relationship",
        "relationship changed",
        "Change the properties of the relationship of a type from a source entity to a target entity (a "
        "property set to null is removed; properties not given stay as they are).",
        UpdateRelationshipArgs,
        plan_update_relationship,
        _apply_update_relationship,
        destructive=True,
    ),
    WriteKind(
        "delete_relationship",
        "Delete relationship",
        "relationship removed",
        "Delete the relationship of a type from a source entity to a target entity.",
        DeleteRelationshipArgs,
        plan_delete_relationship,
        _apply_delete_relationship,
        destructive=True,
    ),
    WriteKind(
        "merge_entities",
        "Merge entities",
        "merged",
        "Merge a duplicate entity (merge) into the entity that stays (keep): the duplicate's relationships "
        "move to keep (one keep already has is collapsed into it), its name and aliases become keep's "
        "aliases, and the duplicate is removed (its id and key then lead to keep).",
        MergeEntitiesArgs,
        plan_merge_entities,
        apply_merge_entities,
        destructive=True,
    ),
    WriteKind(
        "unmerge_entities",
        "Undo a merge",
        "merge undone",
        "Undo merge_entities: restore the merged entity (its id and key) and its relationships as they "
        "were, and take the names the merge added off keep's aliases.",
        UnmergeEntitiesArgs,
        plan_unmerge_entities,
        apply_unmerge_entities,
        destructive=True,
    ),
    WriteKind(
        "restore_entity",
        "Restore entity",
        "restored",
        "Restore a deleted entity under its own id and key, with the relationships its delete removed.",
        RestoreEntityArgs,
        plan_restore_entity,
        apply_restore_entity,
        internal=True,
    ),
)
WRITES: dict[str, WriteKind] = {kind.name: kind for kind in WRITE_KINDS}


def change_action_choices() -> list[tuple[str, str]]:
    """Every change action with its label: one per write tool, then the import's."""
    return [(kind.name, kind.label) for kind in WRITE_KINDS] + [(a, label) for a, label, _ in IMPORT_ACTIONS]


def change_action_words() -> dict[str, str]:
    """How an entity's history on the page says each change happened."""
    return {kind.name: kind.done for kind in WRITE_KINDS} | {a: done for a, _, done in IMPORT_ACTIONS}


def write_plan(*, project_id: uuid.UUID, tool_name: str, args: ToolArgs) -> WritePlan:
    """Work out what write tool ``tool_name`` would change, writing nothing (``ToolError`` if it cannot
    run, ``OntologyViolation`` if it breaks the project's ontology and the project refuses that)."""
    plan = WRITES[tool_name].plan(project_id, args)
    ontology_enforce(project_id=project_id, plan=plan)
    return plan


@dataclass
class WriteOutcome:
    result: dict[str, Any]


def graph_changes_record(
    project_id: uuid.UUID, authorization: WriteAuthorization, rows: list[dict[str, Any]]
) -> int:
    """A new graph version of ``project_id``, with ``rows`` (``GraphChange`` fields) recorded in it
    under ``authorization`` (who, by what authority, which approval and run); the version."""
    version = graph_version_bump(project_id=project_id)
    GraphChange.objects.bulk_create(
        GraphChange(
            project_id=project_id,
            version=version,
            user_id=authorization.user_id,
            authority=authorization.via,
            approval_id=authorization.approval_id,
            run_id=authorization.run_id,
            **row,
        )
        for row in rows
    )
    return version


def write_apply(
    *, project_id: uuid.UUID, tool_name: str, args: ToolArgs, authorization: WriteAuthorization
) -> WriteOutcome:
    """Apply write tool ``tool_name`` in one transaction: the rows, one graph version bump and the
    audit rows, or nothing at all (a ``ToolError`` says why). A write that would change nothing
    writes nothing and keeps the version."""
    applier = WRITES[tool_name].apply
    key = authorization.idempotency_key
    with transaction.atomic():
        project_write_turn(project_id)
        if key is not None:
            done = GraphWriteKey.objects.filter(key=key[:300], project_id=project_id).first()
            if done is not None:
                return WriteOutcome(result=done.result)
        plan = write_plan(project_id=project_id, tool_name=tool_name, args=args)
        if not plan.changes_anything:
            version = graph_version_current(project_id=project_id)
            return WriteOutcome(result=write_result(plan, version, changed=False))
        rows = applier(project_id, args, plan)
        version = graph_changes_record(project_id, authorization, rows)
        result = write_result(plan, version, changed=True)
        if key is not None:
            GraphWriteKey.objects.create(
                key=key[:300], project_id=project_id, tool_name=tool_name, result=json_safe(result)
            )
    return WriteOutcome(result=result)


def write_result(plan: WritePlan, version: int, *, changed: bool) -> dict[str, Any]:
    result = {
        "changed": changed,
        "graph_version": version,
        "summary": plan.summary,
        "changes": plan.changes,
        "before": plan.before,
        "after": plan.after,
    }
    if plan.ontology_violations:  # written, and flagged for review (``ontology/checks.py``)
        result["ontology_violations"] = plan.ontology_violations
    return result


def json_safe(value: Any) -> Any:
    """``value`` as JSON stores it (dates and ids as text)."""
    return json.loads(json.dumps(value, default=str))

"""The write tools' work: plan a change (its human-readable diff, nothing written) and apply it.

``write_plan`` reads only: it is what an approval shows before anyone decides. ``write_apply``
plans again inside one transaction that holds the project's write turn (the lock imports take),
then writes the rows, bumps the graph version once and records one ``GraphChange`` per entity or
relationship changed, all or nothing. Type counts and full text follow by themselves (triggers and
a generated column); a created or renamed entity waits for the background embedding worker, as an
import does.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import Field, StringConstraints

from apps.graph_tools.errors import (
    EntityExists,
    EntityNotFound,
    RelationshipExists,
    RelationshipNotFound,
    ToolError,
)
from apps.graph_tools.importer import MAX_KEY, MAX_NAME, MAX_TYPE, project_write_turn
from apps.graph_tools.models import (
    IMPORT_ACTIONS,
    GraphChange,
    GraphObject,
    GraphObjectEmbedding,
    GraphRelationship,
)
from apps.graph_tools.registry import ToolArgs, WriteAuthorization
from apps.graph_tools.selectors import entity_resolve
from apps.graph_tools.versions import graph_version_bump, graph_version_current

log = logging.getLogger("kgchat.writes")

Key = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_KEY)]
TypeName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TYPE)]
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_NAME)]
Description = Annotated[str, StringConstraints(strip_whitespace=True, max_length=100_000)]
EntityRef = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_KEY),
    Field(description="The entity's id (from a previous result) or its key."),
]


class CreateEntityArgs(ToolArgs):
    key: Key = Field(description="A new, unique key for the entity, e.g. person:alice.")
    type: TypeName = Field(description="The entity type (see list_entity_types).")
    name: Name
    description: Description = ""
    properties: dict[str, Any] = Field(default_factory=dict, description="Property values.")


class UpdateEntityArgs(ToolArgs):
    entity_id: EntityRef
    name: Name | None = None
    description: Description | None = None
    properties: dict[str, Any] | None = Field(
        default=None,
        description="Properties to set; a property given as null is removed; others stay as they are.",
    )


class DeleteEntityArgs(ToolArgs):
    entity_id: EntityRef


class RelationshipArgs(ToolArgs):
    src: EntityRef = Field(description="The source entity's id or key.")
    type: TypeName = Field(description="The relationship type, e.g. works_at.")
    dst: EntityRef = Field(description="The target entity's id or key.")


class CreateRelationshipArgs(RelationshipArgs):
    properties: dict[str, Any] = Field(default_factory=dict, description="Property values.")


class DeleteRelationshipArgs(RelationshipArgs):
    pass


class UpdateRelationshipArgs(RelationshipArgs):
    properties: dict[str, Any] = Field(
        description="Properties to set; a property given as null is removed; others stay as they are."
    )


@dataclass
class WritePlan:
    """What a write tool would change: a summary line, field-level changes and before/after values."""

    tool: str
    summary: str
    changes: list[dict[str, Any]] = field(default_factory=list)
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    # For applying: the rows the plan resolved.
    entity_id: uuid.UUID | None = None
    src: dict[str, Any] | None = None
    dst: dict[str, Any] | None = None
    relationships: list[dict[str, Any]] = field(default_factory=list)

    @property
    def changes_anything(self) -> bool:
        return bool(self.changes)

    def diff(self) -> dict[str, Any]:
        """The human-readable diff clients show: ``summary``, ``changes`` ``[{field, before, after}]``,
        ``before`` and ``after``."""
        return {
            "tool": self.tool,
            "summary": self.summary,
            "changes": self.changes,
            "before": self.before,
            "after": self.after,
        }


def _entity_label(entity: dict[str, Any]) -> str:
    return f'{entity["type"]} "{entity["name"]}" ({entity["key"]})'


def _resolve(project_id: uuid.UUID, ref: str, role: str = "entity") -> dict[str, Any]:
    try:
        return entity_resolve(project_id=project_id, ref=ref)
    except EntityNotFound:
        raise EntityNotFound(
            f"{role} {ref!r} not found in this project (give an entity id or key from a search result)"
        ) from None


def _relationship_row(
    project_id: uuid.UUID, src_id: str, type_: str, dst_id: str
) -> GraphRelationship | None:
    return GraphRelationship.objects.filter(
        project_id=project_id, src_id=uuid.UUID(src_id), type=type_, dst_id=uuid.UUID(dst_id)
    ).first()


def _relationship_value(rel: GraphRelationship, src: dict[str, Any], dst: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(rel.id),
        "type": rel.type,
        "src": src["id"],
        "src_key": src["key"],
        "dst": dst["id"],
        "dst_key": dst["key"],
        "properties": rel.properties,
    }


def _plan_create_entity(project_id: uuid.UUID, args: CreateEntityArgs) -> WritePlan:
    if GraphObject.objects.filter(project_id=project_id, key=args.key).exists():
        raise EntityExists(
            f"an entity with key {args.key!r} already exists in this project (use update_entity)"
        )
    after = {
        "key": args.key,
        "type": args.type,
        "name": args.name,
        "description": args.description,
        "properties": args.properties,
    }
    changes = [{"field": k, "before": None, "after": v} for k, v in after.items() if v not in ("", {})]
    return WritePlan(
        tool="create_entity", summary=f"Create entity {_entity_label(after)}", changes=changes, after=after
    )


def _plan_update_entity(project_id: uuid.UUID, args: UpdateEntityArgs) -> WritePlan:
    if args.name is None and args.description is None and args.properties is None:
        raise ToolError(
            "update_entity needs at least one of name, description, properties", code="invalid_arguments"
        )
    before = _resolve(project_id, args.entity_id)
    after = dict(before, properties=dict(before["properties"] or {}))
    changes: list[dict[str, Any]] = []
    for name in ("name", "description"):
        value = getattr(args, name)
        if value is not None and value != before[name]:
            changes.append({"field": name, "before": before[name], "after": value})
            after[name] = value
    for key, value in (args.properties or {}).items():
        old = after["properties"].get(key)
        if value is None and key in after["properties"]:
            del after["properties"][key]
            changes.append({"field": f"properties.{key}", "before": old, "after": None})
        elif value is not None and (key not in after["properties"] or old != value):
            after["properties"][key] = value
            changes.append({"field": f"properties.{key}", "before": old, "after": value})
    label = _entity_label(before)
    summary = (
        f"Update entity {label}: {', '.join(c['field'] for c in changes)}"
        if changes
        else f"Entity {label} already has these values: nothing to change"
    )
    return WritePlan(
        tool="update_entity",
        summary=summary,
        changes=changes,
        before=before,
        after=after,
        entity_id=uuid.UUID(before["id"]),
    )


def _plan_delete_entity(project_id: uuid.UUID, args: DeleteEntityArgs) -> WritePlan:
    before = _resolve(project_id, args.entity_id)
    rels = GraphRelationship.objects.filter(
        Q(src_id=before["id"]) | Q(dst_id=before["id"]), project_id=project_id
    ).order_by("type", "id")
    relationships = [
        {
            "id": str(r.id),
            "type": r.type,
            "src": str(r.src_id),
            "dst": str(r.dst_id),
            "properties": r.properties,
        }
        for r in rels
    ]
    summary = f"Delete entity {_entity_label(before)}"
    if relationships:
        summary += f" and its {len(relationships)} relationship{'s' if len(relationships) != 1 else ''}"
    return WritePlan(
        tool="delete_entity",
        summary=summary,
        changes=[{"field": "entity", "before": before, "after": None}],
        before={**before, "relationships": relationships},
        entity_id=uuid.UUID(before["id"]),
        relationships=relationships,
    )


def _ends(project_id: uuid.UUID, args: RelationshipArgs) -> tuple[dict[str, Any], dict[str, Any]]:
    return _resolve(project_id, args.src, "source entity"), _resolve(project_id, args.dst, "target entity")


def _plan_create_relationship(project_id: uuid.UUID, args: CreateRelationshipArgs) -> WritePlan:
    src, dst = _ends(project_id, args)
    if _relationship_row(project_id, src["id"], args.type, dst["id"]) is not None:
        raise RelationshipExists(
            f"relationship {src['key']} -{args.type}-> {dst['key']} already exists in this project"
        )
    after = {
        "type": args.type,
        "src": src["id"],
        "src_key": src["key"],
        "dst": dst["id"],
        "dst_key": dst["key"],
        "properties": args.properties,
    }
    return WritePlan(
        tool="create_relationship",
        summary=f"Create relationship {_entity_label(src)} -{args.type}-> {_entity_label(dst)}",
        changes=[{"field": "relationship", "before": None, "after": after}],
        after=after,
        src=src,
        dst=dst,
    )


def _plan_delete_relationship(project_id: uuid.UUID, args: DeleteRelationshipArgs) -> WritePlan:
    src, dst = _ends(project_id, args)
    rel = _relationship_row(project_id, src["id"], args.type, dst["id"])
    if rel is None:
        raise RelationshipNotFound(
            f"no relationship {src['key']} -{args.type}-> {dst['key']} in this project"
        )
    before = _relationship_value(rel, src, dst)
    return WritePlan(
        tool="delete_relationship",
        summary=f"Delete relationship {_entity_label(src)} -{args.type}-> {_entity_label(dst)}",
        changes=[{"field": "relationship", "before": before, "after": None}],
        before=before,
        src=src,
        dst=dst,
    )


def _plan_update_relationship(project_id: uuid.UUID, args: UpdateRelationshipArgs) -> WritePlan:
    src, dst = _ends(project_id, args)
    rel = _relationship_row(project_id, src["id"], args.type, dst["id"])
    if rel is None:
        raise RelationshipNotFound(
            f"no relationship {src['key']} -{args.type}-> {dst['key']} in this project"
        )
    before = _relationship_value(rel, src, dst)
    after = dict(before, properties=dict(before["properties"] or {}))
    changes: list[dict[str, Any]] = []
    for key, value in args.properties.items():
        old = after["properties"].get(key)
        if value is None and key in after["properties"]:
            del after["properties"][key]
            changes.append({"field": f"properties.{key}", "before": old, "after": None})
        elif value is not None and (key not in after["properties"] or old != value):
            after["properties"][key] = value
            changes.append({"field": f"properties.{key}", "before": old, "after": value})
    label = f"{_entity_label(src)} -{args.type}-> {_entity_label(dst)}"
    summary = (
        f"Update relationship {label}: {', '.join(c['field'] for c in changes)}"
        if changes
        else f"Relationship {label} already has these values: nothing to change"
    )
    return WritePlan(
        tool="update_relationship",
        summary=summary,
        changes=changes,
        before=before,
        after=after,
        src=src,
        dst=dst,
    )


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
    fields = ["name", "description", "properties", "updated_at"]
    if (obj.name, obj.description) != (after["name"], after["description"]):
        # The embedded text changed: the background worker embeds the entity again.
        GraphObjectEmbedding.objects.filter(object_id=obj.id).delete()
        obj.embedding_pending = True
        fields.append("embedding_pending")
    obj.name, obj.description, obj.properties = after["name"], after["description"], after["properties"]
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
    plan.after = _relationship_value(rel, plan.src, plan.dst)
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
    all read from ``WRITE_KINDS``. Adding a write tool is its arguments, its planner and applier,
    and one entry here."""

    name: str
    label: str  # the change action's label (admin, audit)
    done: str  # how an entity's history on the page says it happened
    description: str  # what models and MCP clients read
    args_model: type[ToolArgs]
    plan: Planner
    apply: Applier
    destructive: bool = False


WRITE_KINDS: tuple[WriteKind, ...] = (
    WriteKind(
        "create_entity",
        "Create entity",
        "created",
        "Create a new entity with a unique key, a type, a name, a description and properties.",
        CreateEntityArgs,
        _plan_create_entity,
        _apply_create_entity,
    ),
    WriteKind(
        "update_entity",
        "Update entity",
        "updated",
        "Change an entity's name, description and/or properties (a property set to null is removed; "
        "properties not given stay as they are).",
        UpdateEntityArgs,
        _plan_update_entity,
        _apply_update_entity,
        destructive=True,
    ),
    WriteKind(
        "delete_entity",
        "Delete entity",
        "deleted",
        "Delete an entity together with all its relationships.",
        DeleteEntityArgs,
        _plan_delete_entity,
        _apply_delete_entity,
        destructive=True,
    ),
    WriteKind(
        "create_relationship",
        "Create relationship",
        "relationship added",
        "Create a relationship of a type from a source entity to a target entity.",
        CreateRelationshipArgs,
        _plan_create_relationship,
        _apply_create_relationship,
    ),
    WriteKind(
        "update_relationship",
        "Update relationship",
        "relationship changed",
        "Change the properties of the relationship of a type from a source entity to a target entity (a "
        "property set to null is removed; properties not given stay as they are).",
        UpdateRelationshipArgs,
        _plan_update_relationship,
        _apply_update_relationship,
        destructive=True,
    ),
    WriteKind(
        "delete_relationship",
        "Delete relationship",
        "relationship removed",
        "Delete the relationship of a type from a source entity to a target entity.",
        DeleteRelationshipArgs,
        _plan_delete_relationship,
        _apply_delete_relationship,
        destructive=True,
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
    """Work out what write tool ``tool_name`` would change, writing nothing (``ToolError`` if it cannot run)."""
    return WRITES[tool_name].plan(project_id, args)


@dataclass
class WriteOutcome:
    result: dict[str, Any]


def write_apply(
    *, project_id: uuid.UUID, tool_name: str, args: ToolArgs, authorization: WriteAuthorization
) -> WriteOutcome:
    """Apply write tool ``tool_name`` in one transaction: the rows, one graph version bump and the
    audit rows, or nothing at all (a ``ToolError`` says why). A write that would change nothing
    writes nothing and keeps the version."""
    planner, applier = WRITES[tool_name].plan, WRITES[tool_name].apply
    with transaction.atomic():
        project_write_turn(project_id)
        plan = planner(project_id, args)
        if not plan.changes_anything:
            version = graph_version_current(project_id=project_id)
            return WriteOutcome(result=_result(plan, version, changed=False))
        rows = applier(project_id, args, plan)
        version = graph_version_bump(project_id=project_id)
        GraphChange.objects.bulk_create(
            [
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
            ]
        )
    return WriteOutcome(result=_result(plan, version, changed=True))


def _result(plan: WritePlan, version: int, *, changed: bool) -> dict[str, Any]:
    return {
        "changed": changed,
        "graph_version": version,
        "summary": plan.summary,
        "changes": plan.changes,
        "before": plan.before,
        "after": plan.after,
    }

"""What a write tool would change, read without writing: its arguments, its plan (the human-readable
diff an approval shows) and the rows it resolved for the applier (``apps/graph_tools/writes.py``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Annotated, Any

from django.db.models import Q
from pydantic import Field, StringConstraints

from apps.graph_tools.errors import (
    EntityExists,
    EntityNotFound,
    RelationshipExists,
    RelationshipNotFound,
    ToolError,
)
from apps.graph_tools.importer import MAX_KEY, MAX_NAME, MAX_TYPE
from apps.graph_tools.models import (
    GraphObject,
    GraphRelationship,
)
from apps.graph_tools.registry import ToolArgs
from apps.graph_tools.selectors import entity_resolve

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
    type: TypeName | None = Field(default=None, description="A new type for the entity.")
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


def properties_merge(properties: dict[str, Any], given: dict[str, Any]) -> list[dict[str, Any]]:
    """Merge ``given`` into ``properties`` (in place): a property given as null is removed, others set;
    return the field-level changes (``properties.<key>``), none for values it already has."""
    changes = []
    for key, value in given.items():
        old = properties.get(key)
        if value is None and key in properties:
            del properties[key]
            changes.append({"field": f"properties.{key}", "before": old, "after": None})
        elif value is not None and (key not in properties or old != value):
            properties[key] = value
            changes.append({"field": f"properties.{key}", "before": old, "after": value})
    return changes


def entity_label(entity: dict[str, Any]) -> str:
    return f'{entity["type"]} "{entity["name"]}" ({entity["key"]})'


def entity_resolve_named(project_id: uuid.UUID, ref: str, role: str = "entity") -> dict[str, Any]:
    try:
        return entity_resolve(project_id=project_id, ref=ref)
    except EntityNotFound:
        raise EntityNotFound(
            f"{role} {ref!r} not found in this project (give an entity id or key from a search result)"
        ) from None


def relationship_row(project_id: uuid.UUID, src_id: str, type_: str, dst_id: str) -> GraphRelationship | None:
    return GraphRelationship.objects.filter(
        project_id=project_id, src_id=uuid.UUID(src_id), type=type_, dst_id=uuid.UUID(dst_id)
    ).first()


def relationship_value(rel: GraphRelationship, src: dict[str, Any], dst: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(rel.id),
        "type": rel.type,
        "src": src["id"],
        "src_key": src["key"],
        "dst": dst["id"],
        "dst_key": dst["key"],
        "properties": rel.properties,
    }


def plan_create_entity(project_id: uuid.UUID, args: CreateEntityArgs) -> WritePlan:
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
        tool="create_entity", summary=f"Create entity {entity_label(after)}", changes=changes, after=after
    )


def plan_update_entity(project_id: uuid.UUID, args: UpdateEntityArgs) -> WritePlan:
    if args.name is None and args.type is None and args.description is None and args.properties is None:
        raise ToolError(
            "update_entity needs at least one of name, type, description, properties",
            code="invalid_arguments",
        )
    before = entity_resolve_named(project_id, args.entity_id)
    after = dict(before, properties=dict(before["properties"] or {}))
    changes: list[dict[str, Any]] = []
    for name in ("name", "type", "description"):
        value = getattr(args, name)
        if value is not None and value != before[name]:
            changes.append({"field": name, "before": before[name], "after": value})
            after[name] = value
    changes += properties_merge(after["properties"], args.properties or {})
    label = entity_label(before)
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


def plan_delete_entity(project_id: uuid.UUID, args: DeleteEntityArgs) -> WritePlan:
    before = entity_resolve_named(project_id, args.entity_id)
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
    summary = f"Delete entity {entity_label(before)}"
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


def relationship_ends(project_id: uuid.UUID, args: RelationshipArgs) -> tuple[dict[str, Any], dict[str, Any]]:
    return entity_resolve_named(project_id, args.src, "source entity"), entity_resolve_named(
        project_id, args.dst, "target entity"
    )


def plan_create_relationship(project_id: uuid.UUID, args: CreateRelationshipArgs) -> WritePlan:
    src, dst = relationship_ends(project_id, args)
    if relationship_row(project_id, src["id"], args.type, dst["id"]) is not None:
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
        summary=f"Create relationship {entity_label(src)} -{args.type}-> {entity_label(dst)}",
        changes=[{"field": "relationship", "before": None, "after": after}],
        after=after,
        src=src,
        dst=dst,
    )


def plan_delete_relationship(project_id: uuid.UUID, args: DeleteRelationshipArgs) -> WritePlan:
    src, dst = relationship_ends(project_id, args)
    rel = relationship_row(project_id, src["id"], args.type, dst["id"])
    if rel is None:
        raise RelationshipNotFound(
            f"no relationship {src['key']} -{args.type}-> {dst['key']} in this project"
        )
    before = relationship_value(rel, src, dst)
    return WritePlan(
        tool="delete_relationship",
        summary=f"Delete relationship {entity_label(src)} -{args.type}-> {entity_label(dst)}",
        changes=[{"field": "relationship", "before": before, "after": None}],
        before=before,
        src=src,
        dst=dst,
    )


def plan_update_relationship(project_id: uuid.UUID, args: UpdateRelationshipArgs) -> WritePlan:
    src, dst = relationship_ends(project_id, args)
    rel = relationship_row(project_id, src["id"], args.type, dst["id"])
    if rel is None:
        raise RelationshipNotFound(
            f"no relationship {src['key']} -{args.type}-> {dst['key']} in this project"
        )
    before = relationship_value(rel, src, dst)
    after = dict(before, properties=dict(before["properties"] or {}))
    changes: list[dict[str, Any]] = []
    changes += properties_merge(after["properties"], args.properties)
    label = f"{entity_label(src)} -{args.type}-> {entity_label(dst)}"
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

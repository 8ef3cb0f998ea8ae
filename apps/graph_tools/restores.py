"""Restoring a deleted entity under its own id and key, with the relationships its delete removed under
theirs: the internal write ``restore_entity`` (``writes.WRITE_KINDS``, ``internal=True``), which
only an undo of a ``delete_entity`` proposes (``curation/inverses.py``), so an old answer's
citation of the entity and links to it open it again.

Internal: the registry does not offer it (no agent, MCP client or REST tool call names an id of its
choosing) and a member's own change set may not propose it; and it restores only an id this
project's audit records as deleted (``delete_entity``), never one taken again.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q
from pydantic import BaseModel, ConfigDict, Field

from apps.graph_tools.errors import EntityExists, ToolError
from apps.graph_tools.merges import relationships_recreate
from apps.graph_tools.models import GraphChange, GraphObject, GraphRelationship
from apps.graph_tools.registry import ToolArgs
from apps.graph_tools.write_plans import Description, Key, Name, TypeName, WritePlan, entity_label


class RestoredRelationship(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: uuid.UUID
    type: TypeName
    src: uuid.UUID
    dst: uuid.UUID
    properties: dict[str, Any] = Field(default_factory=dict)


class RestoreEntityArgs(ToolArgs):
    id: uuid.UUID = Field(description="The deleted entity's id.")
    key: Key
    type: TypeName
    name: Name
    description: Description = ""
    properties: dict[str, Any] = Field(default_factory=dict)
    relationships: list[RestoredRelationship] = Field(default_factory=list, max_length=100_000)


def _entity(args: RestoreEntityArgs) -> dict[str, Any]:
    return {
        "id": str(args.id),
        "key": args.key,
        "type": args.type,
        "name": args.name,
        "description": args.description,
        "properties": args.properties,
    }


def _restorable(project_id: uuid.UUID, args: RestoreEntityArgs) -> list[dict[str, Any]]:
    """The relationships to write again (``restore: "create"``) and those left out (``"skip"``: the
    other end is gone, or a relationship has its id again)."""
    rels = [r.model_dump(mode="json") for r in args.relationships]
    ends = {uuid.UUID(r[k]) for r in rels for k in ("src", "dst")} - {args.id}
    alive = {
        str(i)
        for i in GraphObject.objects.filter(project_id=project_id, id__in=ends).values_list("id", flat=True)
    } | {str(args.id)}
    taken = {
        str(i)
        for i in GraphRelationship.objects.filter(id__in=[r["id"] for r in rels]).values_list("id", flat=True)
    }
    return [
        {
            **r,
            "restore": "create"
            if r["src"] in alive and r["dst"] in alive and r["id"] not in taken
            else "skip",
        }
        for r in rels
    ]


def plan_restore_entity(project_id: uuid.UUID, args: RestoreEntityArgs) -> WritePlan:
    entity = _entity(args)
    if not GraphChange.objects.filter(
        project_id=project_id, entity_id=args.id, action="delete_entity"
    ).exists():
        raise ToolError(
            f"entity {args.id} was never deleted in this project: nothing to restore",
            code="invalid_arguments",
        )
    if GraphObject.objects.filter(Q(id=args.id) | Q(project_id=project_id, key=args.key)).exists():
        raise EntityExists(
            f"an entity with the id or key of {entity_label(entity)} exists again: cannot restore it"
        )
    rels = _restorable(project_id, args)
    restored = [{k: v for k, v in r.items() if k != "restore"} for r in rels if r["restore"] == "create"]
    skipped = len(rels) - len(restored)
    summary = f"Restore the deleted entity {entity_label(entity)} and {len(restored)} relationship(s)"
    if skipped:
        summary += f" ({skipped} cannot be restored: an end is gone)"
    return WritePlan(
        tool="restore_entity",
        summary=summary,
        changes=[
            {"field": "entity", "before": None, "after": entity},
            *({"field": "relationship", "before": None, "after": r} for r in restored),
        ],
        after={**entity, "relationships": restored},
        entity_id=args.id,
        relationships=restored,
    )


def apply_restore_entity(
    project_id: uuid.UUID, args: RestoreEntityArgs, plan: WritePlan
) -> list[dict[str, Any]]:
    assert plan.after is not None
    entity = {k: v for k, v in plan.after.items() if k != "relationships"}
    GraphObject.objects.create(
        project_id=project_id,
        id=entity["id"],
        **{k: entity[k] for k in ("key", "type", "name", "description", "properties")},
    )
    relationships_recreate(project_id, plan.relationships)
    rows = [
        {
            "action": "restore_entity",
            "relationship_id": r["id"],
            "src_id": r["src"],
            "dst_id": r["dst"],
            "before": None,
            "after": r,
        }
        for r in plan.relationships
    ]
    return [*rows, {"action": "restore_entity", "entity_id": entity["id"], "before": None, "after": entity}]

"""Merging two entities, and undoing a merge: the write tools ``merge_entities`` and
``unmerge_entities`` (their planners and appliers; ``writes.WRITE_KINDS`` declares them, so the
registry, approvals, MCP and curation change sets have them like every other write).

A merge keeps one entity (``keep``) and removes the duplicate (``merge``): each relationship of the
duplicate is re-pointed at ``keep`` (the same row, so its id stays), one ``keep`` already has is
collapsed into it (removed), and one between the two (which would join ``keep`` to itself) is
dropped; the duplicate's name and aliases become aliases of ``keep``. ``keep`` takes what it lacks
of the duplicate (``merge_fill.keep_filled``): its description when ``keep`` has none, and each
property ``keep`` has not (``keep``'s own values win; in a project with an ontology, only those
``keep``'s type declares). Its id and key go on leading to ``keep`` through an ``EntityRedirect``,
which also keeps what ``unmerge_entities`` restores: the duplicate as it was, and what ``keep``
took, which an undo takes back (a value edited since stays).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.utils import timezone
from pydantic import Field

from apps.graph_tools.errors import EntityExists, ToolError
from apps.graph_tools.merge_fill import (
    filled_changes,
    keep_after_merge,
    keep_filled,
    keep_taken_back,
    keep_write,
    taken_back_changes,
)
from apps.graph_tools.models import EntityRedirect, GraphObject, GraphRelationship
from apps.graph_tools.names import ALIASES_PROPERTY, aliases_with, same_name
from apps.graph_tools.registry import ToolArgs
from apps.graph_tools.write_plans import EntityRef, WritePlan, entity_label, entity_resolve_named
from apps.projects.selectors import parse_uuid

REPOINTED, COLLAPSED, DROPPED = "repointed", "collapsed", "dropped"


@dataclass(frozen=True)
class MergeFollower:
    """Rows of an app above this one that name entities and follow a merge (the mention index's
    names, ``documents``): ``merged(project_id, merged_id, keep_id)`` moves them to ``keep`` before
    the merged entity is removed and returns what it moved (JSON, kept in the redirect's snapshot),
    which ``unmerged(project_id, merged_id, keep_id, moved)`` moves back after an undo restored it."""

    name: str
    merged: Callable[[uuid.UUID, str, str], Any]
    unmerged: Callable[[uuid.UUID, str, str, Any], None]


_FOLLOWERS: dict[str, MergeFollower] = {}


def merge_follower_register(follower: MergeFollower) -> None:
    """Let ``follower``'s rows follow merges and their undo (once, at start-up)."""
    _FOLLOWERS[follower.name] = follower


class MergeNotFound(ToolError):
    status = 404
    code = "merge_not_found"


class MergeEntitiesArgs(ToolArgs):
    keep: EntityRef = Field(description="The entity that stays (id or key).")
    merge: EntityRef = Field(description="The duplicate merged into keep and then removed (id or key).")


class UnmergeEntitiesArgs(ToolArgs):
    keep: EntityRef = Field(description="The entity the other was merged into (id or key).")
    merged: EntityRef = Field(description="The id or key the merged entity had.")


def _rel(r: GraphRelationship) -> dict[str, Any]:
    return {
        "id": str(r.id),
        "type": r.type,
        "src": str(r.src_id),
        "dst": str(r.dst_id),
        "properties": r.properties,
    }


def _aliases(entity: dict[str, Any]) -> list[str]:
    value = (entity.get("properties") or {}).get(ALIASES_PROPERTY)
    return [a for a in value if isinstance(a, str)] if isinstance(value, list) else []


def _merged_aliases(keep: dict[str, Any], lose: dict[str, Any]) -> tuple[list[str], list[str]]:
    """``keep``'s aliases with the duplicate's name and aliases added, and the names added."""
    properties, added = dict(keep.get("properties") or {}), []
    for name in [lose["name"], *_aliases(lose)]:
        aliases = aliases_with(properties, name, keep["name"])
        if aliases is not None:
            properties[ALIASES_PROPERTY] = aliases
            added.append(aliases[-1])
    return _aliases({"properties": properties}), added


def _fates(project_id: uuid.UUID, keep_id: str, lose_id: str) -> list[dict[str, Any]]:
    """Each relationship of the duplicate with what the merge does with it (``fate``) and, when it is
    re-pointed, its ends after (``after_src``, ``after_dst``)."""
    rels = list(
        GraphRelationship.objects.filter(
            Q(src_id=lose_id) | Q(dst_id=lose_id), project_id=project_id
        ).order_by("type", "id")
    )
    # Only keep's relationships of the types the duplicate's have can collide with them.
    taken = {
        (str(s), t, str(d))
        for s, t, d in GraphRelationship.objects.filter(
            Q(src_id=keep_id) | Q(dst_id=keep_id), project_id=project_id, type__in={r.type for r in rels}
        ).values_list("src_id", "type", "dst_id")
    }
    fates = []
    for r in rels:
        row = _rel(r)
        src = keep_id if row["src"] == lose_id else row["src"]
        dst = keep_id if row["dst"] == lose_id else row["dst"]
        if src == dst == keep_id:
            fates.append({**row, "fate": DROPPED})
        elif (src, r.type, dst) in taken:
            fates.append({**row, "fate": COLLAPSED})
        else:
            taken.add((src, r.type, dst))
            fates.append({**row, "fate": REPOINTED, "after_src": src, "after_dst": dst})
    return fates


def plan_merge_entities(project_id: uuid.UUID, args: MergeEntitiesArgs) -> WritePlan:
    keep = entity_resolve_named(project_id, args.keep, "kept entity")
    lose = entity_resolve_named(project_id, args.merge, "merged entity")
    if keep["id"] == lose["id"]:
        raise ToolError("keep and merge name the same entity: nothing to merge", code="invalid_arguments")
    fates = _fates(project_id, keep["id"], lose["id"])
    aliases, added = _merged_aliases(keep, lose)
    filled = keep_filled(project_id, keep, lose)
    counts = {f: sum(1 for r in fates if r["fate"] == f) for f in (REPOINTED, COLLAPSED, DROPPED)}
    summary = (
        f"Merge entity {entity_label(lose)} into {entity_label(keep)}: {counts[REPOINTED]} relationship(s) "
        f"re-pointed, {counts[COLLAPSED]} collapsed into ones it has, {counts[DROPPED]} between the two dropped"
    )
    changes: list[dict[str, Any]] = [
        {"field": "entity", "before": lose, "after": None},
        {
            "field": f"properties.{ALIASES_PROPERTY}",
            "before": _aliases(keep) or None,
            "after": aliases or None,
        },
        *filled_changes(keep, filled),
        *({"field": "relationship", "before": r, "after": r["fate"]} for r in fates),
    ]
    return WritePlan(
        tool="merge_entities",
        summary=summary,
        changes=changes,
        before={"keep": keep, "merge": {**lose, "relationships": fates}},
        after={
            "keep": keep_after_merge(keep, aliases, added, filled),
            "merged_into": keep["id"],
            "aliases_added": added,
            "filled": filled,
        },
        entity_id=uuid.UUID(keep["id"]),
        src=keep,
        dst=lose,
        relationships=fates,
    )


def _change(action: str, **values: Any) -> dict[str, Any]:
    return {"action": action, **values}


def _relationships_move(
    project_id: uuid.UUID, fates: list[dict[str, Any]], lose_id: str, keep_id: str, now: Any
) -> None:
    """Remove the collapsed and dropped relationships and re-point the others at ``keep``, in three
    statements whatever the duplicate's degree."""
    gone = [r["id"] for r in fates if r["fate"] != REPOINTED]
    moved = [r["id"] for r in fates if r["fate"] == REPOINTED]
    rels = GraphRelationship.objects.filter(project_id=project_id)
    rels.filter(id__in=gone).delete()
    rels.filter(id__in=moved, src_id=uuid.UUID(lose_id)).update(src_id=keep_id, updated_at=now)
    rels.filter(id__in=moved, dst_id=uuid.UUID(lose_id)).update(dst_id=keep_id, updated_at=now)


def apply_merge_entities(
    project_id: uuid.UUID, args: MergeEntitiesArgs, plan: WritePlan
) -> list[dict[str, Any]]:
    assert (
        plan.src is not None and plan.dst is not None and plan.after is not None and plan.before is not None
    )
    keep, lose, now = plan.src, plan.dst, timezone.now()
    _relationships_move(project_id, plan.relationships, lose["id"], keep["id"], now)
    rows = []
    for r in plan.relationships:
        if r["fate"] == REPOINTED:
            after = {k: r[k] for k in ("id", "type", "properties")} | {
                "src": r["after_src"],
                "dst": r["after_dst"],
            }
            ends = {"src_id": r["after_src"], "dst_id": r["after_dst"]}
        else:
            after, ends = None, {"src_id": r["src"], "dst_id": r["dst"]}
        rows.append(_change("merge_entities", relationship_id=r["id"], **ends, before=r, after=after))
    keep_write(project_id, keep, plan.after["keep"], now)
    moved = {f.name: f.merged(project_id, lose["id"], keep["id"]) for f in _FOLLOWERS.values()}
    GraphObject.objects.filter(project_id=project_id, id=lose["id"]).delete()
    EntityRedirect.objects.update_or_create(
        merged_id=lose["id"],
        defaults={
            "project_id": project_id,
            "merged_key": lose["key"],
            "into": keep["id"],
            "snapshot": {
                **plan.before["merge"],
                "aliases_added": plan.after["aliases_added"],
                "keep_filled": plan.after["filled"],
                "moved": moved,
            },
        },
    )
    return [
        *rows,
        _change("merge_entities", entity_id=keep["id"], before=keep, after=plan.after["keep"]),
        _change(
            "merge_entities",
            entity_id=lose["id"],
            before=plan.before["merge"],
            after={"merged_into": keep["id"]},
        ),
    ]


def _redirect_of(project_id: uuid.UUID, ref: str) -> EntityRedirect:
    found = parse_uuid(ref)
    redirect = (
        EntityRedirect.objects.filter(project_id=project_id)
        .filter(Q(merged_id=found) if found else Q(merged_key=ref))
        .order_by("-created_at")
        .first()
    )
    if redirect is None:
        raise MergeNotFound(f"no merged entity {ref!r} in this project: nothing to undo")
    return redirect


def _restorable(project_id: uuid.UUID, snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """The merged entity's relationships to restore, each with ``restore``: ``back`` (the re-pointed
    row still exists: point it back), ``create`` (write it again) or ``skip`` (an end is gone or
    the same relationship exists again)."""
    lose_id, out = snapshot["id"], []
    rows = {
        str(r.id): r
        for r in GraphRelationship.objects.filter(id__in=[r["id"] for r in snapshot["relationships"]])
    }
    ends = {r[k] for r in snapshot["relationships"] for k in ("src", "dst")} - {lose_id}
    alive = {
        str(i)
        for i in GraphObject.objects.filter(project_id=project_id, id__in=ends).values_list("id", flat=True)
    }
    for r in snapshot["relationships"]:
        row = rows.get(r["id"])
        if (
            row is not None
            and r["fate"] == REPOINTED
            and (str(row.src_id), str(row.dst_id))
            == (
                r["after_src"],
                r["after_dst"],
            )
        ):
            out.append({**r, "restore": "back"})
        elif row is None and all(e == lose_id or e in alive for e in (r["src"], r["dst"])):
            out.append({**r, "restore": "create"})
        else:
            out.append({**r, "restore": "skip"})
    return out


def plan_unmerge_entities(project_id: uuid.UUID, args: UnmergeEntitiesArgs) -> WritePlan:
    redirect = _redirect_of(project_id, args.merged)
    keep = entity_resolve_named(project_id, args.keep, "kept entity")
    if keep["id"] != str(redirect.into):
        raise ToolError(
            f"{args.merged!r} was merged into {redirect.into}, not into {entity_label(keep)}",
            code="invalid_arguments",
        )
    snapshot = redirect.snapshot
    entity = {
        k: v
        for k, v in snapshot.items()
        if k not in ("relationships", "aliases_added", "keep_filled", "moved")
    }
    if GraphObject.objects.filter(Q(id=entity["id"]) | Q(key=entity["key"]), project_id=project_id).exists():
        raise EntityExists(
            f"an entity with the id or key of {entity_label(entity)} exists again: cannot restore it"
        )
    rels = _restorable(project_id, snapshot)
    aliases = [
        a for a in _aliases(keep) if not any(same_name(a, n) for n in snapshot.get("aliases_added", []))
    ]
    keep_after = keep_taken_back(keep, aliases, snapshot.get("keep_filled") or {})
    skipped = sum(1 for r in rels if r["restore"] == "skip")
    summary = f"Undo the merge of {entity_label(entity)} into {entity_label(keep)}: restore it and {len(rels) - skipped} relationship(s)"
    if skipped:
        summary += f" ({skipped} cannot be restored: an end is gone or it exists again)"
    return WritePlan(
        tool="unmerge_entities",
        summary=summary,
        changes=[
            {"field": "entity", "before": None, "after": entity},
            {
                "field": f"properties.{ALIASES_PROPERTY}",
                "before": _aliases(keep) or None,
                "after": aliases or None,
            },
            *taken_back_changes(keep, keep_after),
            *({"field": "relationship", "before": None, "after": r} for r in rels if r["restore"] != "skip"),
        ],
        before={"keep": keep, "merged": entity},
        after={"keep": keep_after, "restored": entity},
        entity_id=uuid.UUID(entity["id"]),
        src=keep,
        dst=entity,
        relationships=rels,
    )


def apply_unmerge_entities(
    project_id: uuid.UUID, args: UnmergeEntitiesArgs, plan: WritePlan
) -> list[dict[str, Any]]:
    assert plan.src is not None and plan.dst is not None and plan.after is not None
    keep, entity, now = plan.src, plan.dst, timezone.now()
    GraphObject.objects.create(
        project_id=project_id,
        id=entity["id"],
        **{k: entity[k] for k in ("key", "type", "name", "description", "properties")},
    )
    restored = [r for r in plan.relationships if r["restore"] != "skip"]
    back = [r["id"] for r in restored if r["restore"] == "back"]
    rels = GraphRelationship.objects.filter(project_id=project_id, id__in=back)
    # A re-pointed relationship had the merged entity at one end (never both: that one was dropped).
    rels.filter(id__in=[r["id"] for r in restored if r["src"] == entity["id"]]).update(
        src_id=entity["id"], updated_at=now
    )
    rels.filter(id__in=[r["id"] for r in restored if r["dst"] == entity["id"]]).update(
        dst_id=entity["id"], updated_at=now
    )
    relationships_recreate(project_id, [r for r in restored if r["restore"] == "create"])
    rows = [
        _change(
            "unmerge_entities",
            relationship_id=r["id"],
            src_id=r["src"],
            dst_id=r["dst"],
            before=None,
            after={k: r[k] for k in ("id", "type", "src", "dst", "properties")},
        )
        for r in restored
    ]
    keep_write(project_id, keep, plan.after["keep"], now)
    moved = EntityRedirect.objects.get(merged_id=entity["id"]).snapshot.get("moved", {})
    for name, followed in moved.items():
        if name in _FOLLOWERS:
            _FOLLOWERS[name].unmerged(project_id, entity["id"], keep["id"], followed)
    EntityRedirect.objects.filter(merged_id=entity["id"]).delete()
    return [
        *rows,
        _change("unmerge_entities", entity_id=keep["id"], before=keep, after=plan.after["keep"]),
        _change("unmerge_entities", entity_id=entity["id"], before=None, after=entity),
    ]


def relationships_recreate(project_id: uuid.UUID, rows: Sequence[dict[str, Any]]) -> None:
    """Relationships written again as a snapshot recorded them (``id``, ``type``, ``src``, ``dst``,
    ``properties``), under their own ids: an unmerge's, an undone delete's."""
    GraphRelationship.objects.bulk_create(
        GraphRelationship(
            project_id=project_id,
            id=r["id"],
            type=r["type"],
            src_id=r["src"],
            dst_id=r["dst"],
            properties=r["properties"],
        )
        for r in rows
    )

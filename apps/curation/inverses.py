"""The inverse of an applied change set's items (``curation_undo``): for each applied write, the
write tool calls that put the graph back as it was, read from what the write recorded on its item
(``result``: the tool's ``before`` and ``after``).

A deleted entity comes back through ``restore_entity`` (``graph_tools/restores.py``, a write only an
undo proposes) under its id and key, with the relationships its delete removed under theirs, so
citations of it and links to it open it again; a merge through ``unmerge_entities`` (its id too). An extraction's created
entities and relationships are undone the same way; its merged mentions (an alias added) are not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apps.documents.models import ChangeSetItem

Change = dict[str, Any]


def _changed_properties(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The properties to set so ``after``'s become ``before``'s again (None: remove)."""
    old, new = before.get("properties") or {}, after.get("properties") or {}
    return {k: old.get(k) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}


def _undo_create_entity(result: dict[str, Any]) -> list[Change]:
    return [{"action": "delete_entity", "args": {"entity_id": result["after"]["id"]}}]


def _undo_update_entity(result: dict[str, Any]) -> list[Change]:
    before, after = result["before"], result["after"]
    args: dict[str, Any] = {"entity_id": before["id"]}
    for field in ("name", "type", "description"):
        if before.get(field) != after.get(field):
            args[field] = before.get(field) or ""
    properties = _changed_properties(before, after)
    if properties:
        args["properties"] = properties
    return [{"action": "update_entity", "args": args}]


def _undo_delete_entity(result: dict[str, Any]) -> list[Change]:
    before = result["before"]
    entity = {k: before[k] for k in ("id", "key", "type", "name")}
    entity |= {"description": before.get("description") or "", "properties": before.get("properties") or {}}
    relationships = [
        {k: r[k] for k in ("id", "type", "src", "dst")} | {"properties": r.get("properties") or {}}
        for r in before.get("relationships", [])
    ]
    return [{"action": "restore_entity", "args": {**entity, "relationships": relationships}}]


def _undo_restore_entity(result: dict[str, Any]) -> list[Change]:
    return [{"action": "delete_entity", "args": {"entity_id": result["after"]["id"]}}]


def _undo_create_relationship(result: dict[str, Any]) -> list[Change]:
    after = result["after"]
    return [{"action": "delete_relationship", "args": {k: after[k] for k in ("src", "type", "dst")}}]


def _undo_delete_relationship(result: dict[str, Any]) -> list[Change]:
    before = result["before"]
    args = {k: before[k] for k in ("src", "type", "dst")} | {"properties": before.get("properties") or {}}
    return [{"action": "create_relationship", "args": args}]


def _undo_update_relationship(result: dict[str, Any]) -> list[Change]:
    before, after = result["before"], result["after"]
    args = {k: before[k] for k in ("src", "type", "dst")} | {"properties": _changed_properties(before, after)}
    return [{"action": "update_relationship", "args": args}]


def _undo_merge_entities(result: dict[str, Any]) -> list[Change]:
    before = result["before"]
    return [
        {
            "action": "unmerge_entities",
            "args": {"keep": before["keep"]["id"], "merged": before["merge"]["id"]},
        }
    ]


def _undo_unmerge_entities(result: dict[str, Any]) -> list[Change]:
    before = result["before"]
    return [
        {"action": "merge_entities", "args": {"keep": before["keep"]["id"], "merge": before["merged"]["id"]}}
    ]


INVERSES: dict[str, Callable[[dict[str, Any]], list[Change]]] = {
    "create_entity": _undo_create_entity,
    "update_entity": _undo_update_entity,
    "delete_entity": _undo_delete_entity,
    "create_relationship": _undo_create_relationship,
    "delete_relationship": _undo_delete_relationship,
    "update_relationship": _undo_update_relationship,
    "merge_entities": _undo_merge_entities,
    "unmerge_entities": _undo_unmerge_entities,
    "restore_entity": _undo_restore_entity,
}


def change_set_inverse(items: list[ChangeSetItem]) -> list[Change]:
    """The changes undoing ``items`` (applied, given last first); ``ValueError`` names an item that
    has no inverse."""
    changes: list[Change] = []
    for item in items:
        undo = INVERSES.get(item.action)
        result = item.result if isinstance(item.result, dict) else None
        if undo is None or result is None:
            raise ValueError(f"item {item.id} ({item.action}) cannot be undone")
        if result.get("changed") is False:
            continue
        try:
            changes += undo(result)
        except (KeyError, TypeError, AttributeError):
            # A result recorded in another shape (an older write): say so rather than guess.
            raise ValueError(f"item {item.id} ({item.action}) did not record what undoing it needs") from None
    return changes

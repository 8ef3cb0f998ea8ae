"""What the entity a merge keeps takes of the one merged into it, and what undoing the merge takes
back (``merges.py``): the merged entity's description when the kept one has none, and each property
the kept one has not (its own values win), which an undo removes again unless edited since.
"""

from __future__ import annotations

import uuid
from typing import Any

from apps.graph_tools.models import GraphObject, GraphObjectEmbedding
from apps.graph_tools.names import ALIASES_PROPERTY
from apps.graph_tools.ontology.checks import properties_violations
from apps.graph_tools.ontology.selectors import ontology_active


def keep_filled(project_id: uuid.UUID, keep: dict[str, Any], lose: dict[str, Any]) -> dict[str, Any]:
    """What ``keep`` takes of the duplicate: ``description`` (when ``keep`` has none) and
    ``properties`` ``keep`` has not (aliases aside: they are merged as names); in a project with an
    ontology only the properties ``keep``'s type declares, with a value of their datatype, so a
    merge never breaks it by what it copies."""
    filled: dict[str, Any] = {}
    if not keep.get("description") and lose.get("description"):
        filled["description"] = lose["description"]
    own = keep.get("properties") or {}
    values = {
        k: v
        for k, v in (lose.get("properties") or {}).items()
        if k != ALIASES_PROPERTY and k not in own and v is not None
    }
    ontology = ontology_active(project_id=project_id) if values else None
    if ontology is not None:
        typedef = ontology.entity(keep["type"])
        values = {
            k: v
            for k, v in values.items()
            if not properties_violations(typedef, "entity", keep["type"], {k: v})
        }
    if values:
        filled["properties"] = values
    return filled


def keep_after_merge(
    keep: dict[str, Any], aliases: list[str], added: list[str], filled: dict[str, Any]
) -> dict[str, Any]:
    """``keep`` as the merge leaves it: the names added to its aliases, what it took filled in."""
    properties = {**(keep["properties"] or {}), **filled.get("properties", {})}
    if added:
        properties[ALIASES_PROPERTY] = aliases
    return {**keep, "description": filled.get("description", keep["description"]), "properties": properties}


def filled_changes(keep: dict[str, Any], filled: dict[str, Any]) -> list[dict[str, Any]]:
    """The field changes of what ``keep`` takes (``keep_filled``)."""
    changes = []
    if "description" in filled:
        changes.append(
            {"field": "description", "before": keep["description"], "after": filled["description"]}
        )
    changes += [
        {"field": f"properties.{k}", "before": None, "after": v}
        for k, v in filled.get("properties", {}).items()
    ]
    return changes


def keep_write(project_id: uuid.UUID, before: dict[str, Any], after: dict[str, Any], now: Any) -> None:
    """Write ``keep``'s description and properties as ``after`` has them when they differ from
    ``before``'s; a new description waits for the background worker's vector, as an update's does."""
    values = {k: after[k] for k in ("description", "properties") if after[k] != before[k]}
    if not values:
        return
    if "description" in values:
        GraphObjectEmbedding.objects.filter(object_id=after["id"]).delete()
        values["embedding_pending"] = True
    GraphObject.objects.filter(project_id=project_id, id=after["id"]).update(**values, updated_at=now)


def keep_taken_back(keep: dict[str, Any], aliases: list[str], filled: dict[str, Any]) -> dict[str, Any]:
    """``keep`` with the merge's aliases (``aliases``: those left) and what it took (``keep_filled``)
    taken back: as it was before the merge, but for a value edited since, which stays."""
    properties = {**(keep["properties"] or {}), ALIASES_PROPERTY: aliases}
    if not aliases:
        del properties[ALIASES_PROPERTY]
    for k, v in filled.get("properties", {}).items():
        if properties.get(k) == v:
            del properties[k]
    description = keep["description"]
    if "description" in filled and description == filled["description"]:
        description = ""
    return {**keep, "description": description, "properties": properties}


def taken_back_changes(keep: dict[str, Any], keep_after: dict[str, Any]) -> list[dict[str, Any]]:
    """The field changes of what an undo takes back from ``keep`` (its aliases aside)."""
    changes = []
    if keep["description"] != keep_after["description"]:
        changes.append(
            {"field": "description", "before": keep["description"], "after": keep_after["description"]}
        )
    before, after = keep["properties"] or {}, keep_after["properties"]
    changes += [
        {"field": f"properties.{k}", "before": v, "after": None}
        for k, v in before.items()
        if k not in after and k != ALIASES_PROPERTY
    ]
    return changes

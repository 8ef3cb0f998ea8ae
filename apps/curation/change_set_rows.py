"""The curation change sets as the change-sets page shows them (#51): each item as the write it
proposes (the tool's label, its plan's sentence, its arguments with entities by name), and whether
an applied set has been undone already, or an undo of it waits for review."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from apps.curation.selectors import change_set_list
from apps.documents.models import ChangeSet, ChangeSetItem, ChangeSetKind, ExtractionStatus
from apps.graph_tools.models import GraphObject
from apps.graph_tools.writes import WRITES
from apps.projects.models import Project, Role
from apps.projects.selectors import Principal, parse_uuid, project_get, project_role

# A write tool's arguments that name an entity (its id or key), and how the page says each argument.
ENTITY_ARGS = frozenset({"entity_id", "keep", "merge", "merged", "src", "dst"})
ARG_LABELS = {
    "entity_id": "entity",
    "keep": "keeps",
    "merge": "merges in",
    "merged": "brings back",
    "src": "from",
    "dst": "to",
}
ARG_TEXT_MAX = 200


@dataclass(frozen=True)
class ItemArg:
    label: str
    text: str
    entity_id: str | None = None  # an entity of the graph now: the page links to it


@dataclass(frozen=True)
class ItemRow:
    id: int
    status: str
    action: str
    action_label: str
    sentence: str
    args: list[ItemArg] = field(default_factory=list)


@dataclass(frozen=True)
class ChangeSetRow:
    change_set: ChangeSet
    items: list[ItemRow]
    undone_by: ChangeSet | None  # an applied undo of it
    undo_waiting: ChangeSet | None  # an undo of it in review

    @property
    def can_undo(self) -> bool:
        cs = self.change_set
        written = cs.status == ExtractionStatus.APPLIED and cs.graph_version is not None
        return written and self.undone_by is None and self.undo_waiting is None


def _plan(item: ChangeSetItem) -> dict[str, Any]:
    plan = (item.evidence or {}).get("plan") if isinstance(item.evidence, dict) else None
    return plan if isinstance(plan, dict) else {}


def _plan_names(plan: dict[str, Any]) -> dict[str, str]:
    """The names the item's plan recorded of the entities it touches, by their ids and keys (an
    entity merged or deleted since keeps its name here)."""
    names: dict[str, str] = {}
    for change in plan.get("changes") or []:
        if not isinstance(change, dict):
            continue
        for side in (change.get("before"), change.get("after")):
            if isinstance(side, dict) and isinstance(side.get("name"), str):
                for ref in (side.get("id"), side.get("key")):
                    if isinstance(ref, str):
                        names[ref] = side["name"]
    return names


def _graph_entities(project_id: uuid.UUID, refs: set[str]) -> dict[str, tuple[str, str]]:
    """The project's entities that ``refs`` name now (by id or key): ref → (id, name)."""
    if not refs:
        return {}
    ids = {u for u in map(parse_uuid, refs) if u is not None}
    rows = GraphObject.objects.filter(Q(key__in=refs) | Q(id__in=ids), project_id=project_id).values_list(
        "id", "key", "name"
    )
    found: dict[str, tuple[str, str]] = {}
    for entity_id, key, name in rows:
        found[str(entity_id)] = found[key] = (str(entity_id), name)
    return found


def _text(value: Any) -> str:
    if value is None:
        return "(removed)"
    if isinstance(value, str):
        text = value
    elif isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        text = ", ".join(map(str, value))
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= ARG_TEXT_MAX else text[: ARG_TEXT_MAX - 1] + "…"


def _args(
    action: str, values: dict[str, Any], names: dict[str, str], graph: dict[str, tuple[str, str]]
) -> list[ItemArg]:
    """The arguments in the order the write tool declares them (a stored item's are in jsonb's)."""
    kind = WRITES.get(action)
    order = list(kind.args_model.model_fields) if kind else []
    args = []
    for name, value in sorted(
        values.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0])
    ):
        if name in ENTITY_ARGS and isinstance(value, str):
            ref = value.strip()
            linked = graph.get(ref)
            shown = names.get(ref) or (linked[1] if linked else ref)
            args.append(ItemArg(ARG_LABELS[name], shown, linked[0] if linked else None))
        elif name == "properties" and isinstance(value, dict):
            args += [ItemArg(f"property {k}", _text(v)) for k, v in value.items()]
        else:
            args.append(ItemArg(ARG_LABELS.get(name, name.replace("_", " ")), _text(value)))
    return args


def _item_rows(project_id: uuid.UUID, items: Sequence[ChangeSetItem]) -> dict[int, ItemRow]:
    plans = {item.id: _plan(item) for item in items}
    names = {item.id: _plan_names(plans[item.id]) for item in items}
    refs = {
        v.strip()
        for item in items
        if isinstance(item.values, dict)
        for k, v in item.values.items()
        if k in ENTITY_ARGS and isinstance(v, str)
    }
    graph = _graph_entities(project_id, refs)
    rows = {}
    for item in items:
        kind = WRITES.get(item.action)
        label = kind.label if kind else item.action.replace("_", " ").capitalize()
        summary = plans[item.id].get("summary")
        values = item.values if isinstance(item.values, dict) else {}
        rows[item.id] = ItemRow(
            id=item.id,
            status=item.status,
            action=item.action,
            action_label=label,
            sentence=summary if isinstance(summary, str) else "",
            args=_args(item.action, values, names[item.id], graph),
        )
    return rows


def _undos(change_sets: Iterable[ChangeSet]) -> tuple[dict[uuid.UUID, ChangeSet], dict[uuid.UUID, ChangeSet]]:
    """Of each change set, the undo of it that was applied (a change written), and the one that
    waits for review; an undo rejected whole undid nothing and is neither."""
    undos = ChangeSet.objects.filter(
        undoes_id__in=[cs.id for cs in change_sets],
        status__in=(ExtractionStatus.APPLIED, ExtractionStatus.REVIEW),
    ).order_by("created_at", "id")
    applied: dict[uuid.UUID, ChangeSet] = {}
    waiting: dict[uuid.UUID, ChangeSet] = {}
    for undo in undos:
        assert undo.undoes_id is not None
        if undo.status == ExtractionStatus.REVIEW:
            waiting.setdefault(undo.undoes_id, undo)
        elif undo.graph_version is not None:
            applied[undo.undoes_id] = undo  # the latest applied
    return applied, waiting


def change_set_rows(*, project_id: uuid.UUID, change_sets: Sequence[ChangeSet]) -> list[ChangeSetRow]:
    """``change_sets`` (their items prefetched) as the page's rows."""
    items = [item for cs in change_sets for item in sorted(cs.items.all(), key=lambda i: i.ordinal)]
    rows = _item_rows(project_id, items)
    applied, waiting = _undos(change_sets)
    return [
        ChangeSetRow(
            change_set=cs,
            items=[rows[item.id] for item in sorted(cs.items.all(), key=lambda i: i.ordinal)],
            undone_by=applied.get(cs.id),
            undo_waiting=None if cs.id in applied else waiting.get(cs.id),
        )
        for cs in change_sets
    ]


@dataclass(frozen=True)
class ChangeSetsPage:
    project: Project
    rows: list[ChangeSetRow]
    may_change: bool  # an editor or owner: approves, rejects and undoes from the page


def change_sets_page_read(*, principal: Principal, project_ref: object, limit: int) -> ChangeSetsPage:
    """The project's first ``limit`` curation change sets, newest first, as the page's rows, and
    whether the principal may act on them; ``NotFound`` for a project they are not a member of."""
    project = project_get(principal=principal, project_ref=project_ref)
    sets = list(
        change_set_list(principal=principal, project_ref=project.id, kind=ChangeSetKind.CURATION)[:limit]
    )
    return ChangeSetsPage(
        project=project,
        rows=change_set_rows(project_id=project.id, change_sets=sets),
        may_change=project_role(principal=principal, project=project) in (Role.OWNER, Role.EDITOR),
    )

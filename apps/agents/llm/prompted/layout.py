"""Tool results as a small model reads them: short lines, every entity a citable link, capped.

A small model reads what it is given and little more: it copies a number it sees, it does not
count a list, and a fact past the cut is lost. So the layout states what it can:

- an entity's relationships (``get_entity_edges``) are grouped by type and direction, each group
  one line with its size: "Portugal borders (1, both ways): [Spain](entity:country:ES)"; the
  smallest groups come first, so single facts (a capital, a currency) are never cut off by a
  long group (the cities of a country), and a long group shows its first ``GROUP_SHOWN`` members
  and how many more there are;
- a list of search hits shows the first ``HITS_SHOWN``, descriptions clipped, and says how many
  there were in all.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

RESULT_MAX_CHARS = 1500
HITS_SHOWN = 8
DESCRIPTION_MAX_CHARS = 320
GROUP_SHOWN = 15
# Keys of tool results a model does not need: ids are long and the key refers to the same entity.
SKIPPED_KEYS = frozenset({"id", "score", "rank", "embedding", "vector", "distance"})


def clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def is_entity(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(value.get(k), str) for k in ("key", "name"))


def link(entity: dict[str, Any]) -> str:
    return f"[{entity['name']}](entity:{entity['key']})"


def entities(value: Any) -> list[dict[str, Any]]:
    """Every entity object anywhere in a tool result."""
    if is_entity(value):
        return [value]
    if isinstance(value, dict):
        return [e for v in value.values() for e in entities(v)]
    if isinstance(value, list):
        return [e for v in value for e in entities(v)]
    return []


def words(text: str) -> str:
    """``text`` folded for whole-word comparison: no case or accents, punctuation as spaces."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(ch if ch.isalnum() else " " for ch in folded if not unicodedata.combining(ch))
    return f" {' '.join(plain.split())} "


def _plain(value: Any) -> str:
    if is_entity(value):
        return link(value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_plain(v)}" for k, v in value.items() if k not in SKIPPED_KEYS)
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value)
    return str(value)


def _line(item: dict[str, Any]) -> str:
    """One result on one line; an entity reads "[Name](entity:key) Type: description; k: v"."""
    rest = {k: v for k, v in item.items() if k not in SKIPPED_KEYS and v not in (None, "", [], {})}
    head: list[str] = []
    if is_entity(rest):
        head.append(link({"name": rest.pop("name"), "key": rest.pop("key")}))
        if "type" in rest:
            head.append(str(rest.pop("type")))
        if "description" in rest:
            head[-1] += ":"
            head.append(clip(str(rest.pop("description")), DESCRIPTION_MAX_CHARS))
    fields = []
    for key, value in rest.items():
        if isinstance(value, dict) and not is_entity(value):
            value = {k: v for k, v in value.items() if k not in SKIPPED_KEYS}
        fields.append(f"{key}: {_plain(value) if isinstance(value, dict) else _json(value)}")
    return "; ".join([" ".join(head), *fields] if head else fields)


def _json(value: Any) -> str:
    if is_entity(value):
        return link(value)
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _items(key: str, items: list[Any]) -> list[str]:
    shown = items[:HITS_SHOWN] if all(is_entity(x) for x in items) else items
    lines = [f"{key} ({len(items)}):" if len(shown) < len(items) else f"{key}:"]
    lines.extend(f"- {_line(x) if isinstance(x, dict) else _json(x)}" for x in shown)
    if len(shown) < len(items):
        lines.append(f"(first {len(shown)} of {len(items)} shown)")
    return lines


def _is_edge(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("type"), str)
        and value.get("direction") in ("out", "in")
        and is_entity(value.get("other"))
    )


def _relation(type_: str) -> str:
    return " ".join(type_.replace("_", " ").split()).lower()


def edge_groups(entity: dict[str, Any], edges: list[dict[str, Any]]) -> list[str]:
    """One line per relationship type and direction, with its size, smallest groups first.

    "out": "<Entity> <relation> (n): members"; "in": "<relation> <Entity> (n): members" (each
    member stands in that relation to the entity); a type whose out and in members are the same
    (a symmetric relation stored both ways) is one group "… (n, both ways)".
    """
    name = str(entity.get("name") or "it")
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for edge in edges:
        members = groups.setdefault((edge["type"], edge["direction"]), [])
        if all(m["key"] != edge["other"]["key"] for m in members):
            members.append(edge["other"])
    rows: list[tuple[int, str, list[dict[str, Any]]]] = []
    for (type_, direction), members in groups.items():
        relation = _relation(type_)
        if direction == "in" and (type_, "out") in groups:
            out_keys = {m["key"] for m in groups[(type_, "out")]}
            if out_keys == {m["key"] for m in members}:
                continue  # written once with the out group, as "both ways"
        if direction == "out":
            back = groups.get((type_, "in"))
            both = back is not None and {m["key"] for m in back} == {m["key"] for m in members}
            head = f"{name} {relation} ({len(members)}{', both ways' if both else ''})"
        else:
            head = f"{relation} {name} ({len(members)})"
        rows.append((len(members), head, members))
    rows.sort(key=lambda row: (row[0], row[1]))
    lines = []
    for size, head, members in rows:
        shown = ", ".join(link(m) for m in members[:GROUP_SHOWN])
        more = f", … and {size - GROUP_SHOWN} more" if size > GROUP_SHOWN else ""
        lines.append(f"- {head}: {shown}{more}")
    return lines


def _edges_layout(data: dict[str, Any]) -> list[str]:
    entity = data["entity"]
    lines = [_line({k: v for k, v in entity.items() if k != "properties"})]
    properties = entity.get("properties")
    if isinstance(properties, dict) and properties:
        lines.append(f"properties: {_plain(properties)}")
    edges = [e for e in data["edges"] if _is_edge(e)]
    lines.append(f"relationships ({len(edges)}):" if edges else "relationships: none")
    lines.extend(edge_groups(entity, edges))
    return lines


def _lines(value: Any) -> list[str]:
    if isinstance(value, dict):
        if is_entity(value.get("entity")) and isinstance(value.get("edges"), list):
            return _edges_layout(value)
        lines: list[str] = []
        for key, item in value.items():
            if key in SKIPPED_KEYS or item in (None, "", [], {}):
                continue
            if isinstance(item, list):
                lines.extend(_items(key, item))
            elif isinstance(item, dict):
                lines.append(f"{key}: {_line(item)}")
            else:
                lines.append(f"{key}: {item}")
        return lines
    if isinstance(value, list):
        return [f"- {_line(x) if isinstance(x, dict) else _json(x)}" for x in value]
    return [str(value)]


def layout_result(content: str, limit: int = RESULT_MAX_CHARS) -> str:
    """A tool result as the model reads it: short lines, entities as citable links, ``limit`` chars."""
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return clip(content, limit)
    if isinstance(data, dict) and "error" in data and len(data) <= 2:
        return f"error: {data['error']}"
    if data in ({}, [], None) or (isinstance(data, dict) and all(v in ([], {}, None) for v in data.values())):
        return "(no results)"
    text = "\n".join(_lines(data))
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit)
    return text[: cut if cut > 0 else limit] + "\n… (more results cut)"

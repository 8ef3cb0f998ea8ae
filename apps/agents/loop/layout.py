"""A tool result as the small model reads it: short lines, every entity a citable link, capped."""

from __future__ import annotations

import json
from typing import Any

from apps.agents.loop.lookups import is_entity

RESULT_MAX_CHARS = 1500
# Keys of tool results a model does not need: ids are long and the key refers to the same entity.
SKIPPED_KEYS = frozenset({"id", "score", "rank", "embedding", "vector", "distance"})


def clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _plain(value: Any) -> str:
    if is_entity(value):
        return f"[{value['name']}](entity:{value['key']})"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _line(item: dict[str, Any]) -> str:
    """One result on one line; an entity reads "[Name](entity:key) Type: description; k: v"."""
    rest = {k: v for k, v in item.items() if k not in SKIPPED_KEYS and v not in (None, "", [], {})}
    head: list[str] = []
    if is_entity(rest):
        head.append(f"[{rest.pop('name')}](entity:{rest.pop('key')})")
        if "type" in rest:
            head.append(str(rest.pop("type")))
        if "description" in rest:
            head[-1] += ":"
            head.append(str(rest.pop("description")))
    fields = []
    for key, value in rest.items():
        if isinstance(value, dict) and not is_entity(value):
            value = {k: v for k, v in value.items() if k not in SKIPPED_KEYS}
        fields.append(f"{key}: {_plain(value)}")
    return "; ".join([" ".join(head), *fields] if head else fields)


def _lines(value: Any) -> list[str]:
    if isinstance(value, dict):
        lines: list[str] = []
        for key, item in value.items():
            if key in SKIPPED_KEYS or item in (None, "", [], {}):
                continue
            if isinstance(item, list):
                lines.append(f"{key}:")
                lines.extend(f"- {_line(x) if isinstance(x, dict) else _plain(x)}" for x in item)
            elif isinstance(item, dict):
                lines.append(f"{key}: {_line(item)}")
            else:
                lines.append(f"{key}: {item}")
        return lines
    if isinstance(value, list):
        return [f"- {_line(x) if isinstance(x, dict) else _plain(x)}" for x in value]
    return [str(value)]


def _pending_note(data: Any) -> tuple[Any, str]:
    """A search result without its ``embedding`` key, and the line saying what that key said.

    A search that ranks by vectors says ``"embedding": {"pending": n}`` while ``n`` entities have
    no vector yet (PROTOCOL §6); the model reads it as a sentence, not as a field of the results.
    """
    if not isinstance(data, dict) or "embedding" not in data:
        return data, ""
    pending = data["embedding"].get("pending") if isinstance(data["embedding"], dict) else None
    rest = {k: v for k, v in data.items() if k != "embedding"}
    if not isinstance(pending, int) or pending <= 0:
        return rest, ""
    if pending == 1:
        return rest, "(1 entity of the graph is still being indexed: this search may have missed it.)"
    return (
        rest,
        f"({pending} entities of the graph are still being indexed: this search may have missed them.)",
    )


def layout_result(content: str, limit: int = RESULT_MAX_CHARS) -> str:
    """A tool result as the model reads it: short lines, entities as citable links, ``limit`` chars."""
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return clip(content, limit)
    if isinstance(data, dict) and "error" in data and len(data) <= 2:
        return f"error: {data['error']}"
    data, note = _pending_note(data)
    note = f"\n{note}" if note else ""
    if data in ({}, [], None) or (isinstance(data, dict) and all(v in ([], {}, None) for v in data.values())):
        return "(no results)" + note
    text = "\n".join(_lines(data))
    if len(text) <= limit:
        return text + note
    cut = text.rfind("\n", 0, limit)
    return text[: cut if cut > 0 else limit] + "\n… (more results cut)" + note

"""A tool result as the small model reads it: short lines, every entity (and every passage of a
document) a citable link, capped."""

from __future__ import annotations

import json
from typing import Any

from apps.agents.loop.lookups import is_entity, is_passage

RESULT_MAX_CHARS = 1500
# Keys of tool results a model does not need: ids are long and the key refers to the same entity.
SKIPPED_KEYS = frozenset({"id", "score", "rank", "embedding", "vector", "distance"})
# How much of one passage's text the model reads (a passage holds up to 1,500 characters).
PASSAGE_TEXT_MAX = 400


def clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _plain(value: Any) -> str:
    if is_entity(value):
        return f"[{value['name']}](entity:{value['key']})"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def snippet(text: str, limit: int = PASSAGE_TEXT_MAX) -> str:
    """``text`` on one line, cut to ``limit`` characters at the end of a sentence where there is one."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    end = text.rfind(". ", 0, limit)
    return text[: end + 1] if end > 0 else text[: limit - 1].rstrip() + "…"


def passage_line(passage: dict[str, Any]) -> str:
    """A passage as one line: "[guide.md](passage:<id>) page 3: its text…".

    The link is what the answer cites (the document's name, the passage's id: docs/protocol.md);
    its offsets, ordinal and document id are left out, the text cut to ``PASSAGE_TEXT_MAX``.
    """
    page = passage.get("page")
    where = f" page {page}" if isinstance(page, int) and not isinstance(page, bool) else ""
    return f"[{passage['document_name']}](passage:{passage['id']}){where}: {snippet(passage['text'])}"


def _line(item: dict[str, Any]) -> str:
    """One result on one line; an entity reads "[Name](entity:key) Type: description; k: v"."""
    if is_passage(item):
        return passage_line(item)
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


def _pending_note(data: Any, passages: bool | None = None) -> tuple[Any, str]:
    """A search result without its ``embedding`` key, and the line saying what that key said.

    A search that ranks by vectors says ``"embedding": {"pending": n}`` while ``n`` entities (for
    ``search_passages``: passages) have no vector yet (PROTOCOL §6); the model reads it as a
    sentence, not as a field of the results. ``passages``: whether the result is a passage search's
    (None: whether its results are passages).
    """
    if not isinstance(data, dict) or "embedding" not in data:
        return data, ""
    pending = data["embedding"].get("pending") if isinstance(data["embedding"], dict) else None
    rest = {k: v for k, v in data.items() if k != "embedding"}
    if not isinstance(pending, int) or pending <= 0:
        return rest, ""
    if passages is None:
        results = rest.get("results")
        passages = isinstance(results, list) and bool(results) and all(is_passage(r) for r in results)
    one, many = (
        ("passage of the documents", "passages of the documents")
        if passages
        else ("entity of the graph", "entities of the graph")
    )
    if pending == 1:
        return rest, f"(1 {one} is still being indexed: this search may have missed it.)"
    return rest, f"({pending} {many} are still being indexed: this search may have missed them.)"


def layout_result(content: str, limit: int = RESULT_MAX_CHARS, *, passages: bool | None = None) -> str:
    """A tool result as the model reads it: short lines, entities and passages as citable links,
    ``limit`` chars. ``passages``: whether it is a passage search's result (None: as its results say)."""
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return clip(content, limit)
    if isinstance(data, dict) and "error" in data and len(data) <= 2:
        return f"error: {data['error']}"
    data, note = _pending_note(data, passages)
    note = f"\n{note}" if note else ""
    if data in ({}, [], None) or (isinstance(data, dict) and all(v in ([], {}, None) for v in data.values())):
        return "(no results)" + note
    text = "\n".join(_lines(data))
    if len(text) <= limit:
        return text + note
    cut = text.rfind("\n", 0, limit)
    return text[: cut if cut > 0 else limit] + "\n… (more results cut)" + note


def layout_passages(content: str, limit: int = RESULT_MAX_CHARS) -> str:
    """A passage search's result as the model reads it: one line a passage, each a citable link
    ``[document](passage:<id>)`` with its text (``passage_line``), ``limit`` chars in all."""
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return clip(content, limit)
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        return layout_result(content, limit, passages=True)
    rest, note = _pending_note(data, passages=True)
    text = layout_result(json.dumps(rest["results"]), limit)
    return f"{text}\n{note}" if note else text

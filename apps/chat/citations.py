"""Checked citations: ``[Name](entity:<id>)`` links survive only for entities a tool returned.

The agent is told to cite entities as Markdown links. A link to an id no tool returned in this
conversation is turned into plain text *while streaming*, so the tokens a client receives
concatenate to exactly the persisted answer. ``CitationFilter`` holds back only the text that
may still become such a link.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from apps.chat.frames import Citation

MAX_LABEL = 300
MAX_REF = 200
PREFIX = "(entity:"
LINK = re.compile(rf"\[([^\[\]\n]{{1,{MAX_LABEL}}})\]\(entity:([^()\s]{{1,{MAX_REF}}})\)")


def iter_entities(value: Any) -> Iterator[dict[str, Any]]:
    """Yield every entity-shaped object (``id``, ``key``, ``type``, ``name``) inside a tool result."""
    if isinstance(value, dict):
        if all(isinstance(value.get(k), str) for k in ("id", "key", "type", "name")):
            yield value
        for child in value.values():
            yield from iter_entities(child)
    elif isinstance(value, list):
        for child in value:
            yield from iter_entities(child)


class KnownEntities:
    """Entities returned by tools in a conversation, by id and by key.

    Built from the conversation's stored map (``{id: {id, key, type, name}}``); what tools return
    during the turn is added, and ``new`` is what the turn learnt, to be stored with its answer.
    """

    def __init__(self, stored: dict[str, dict[str, Any]] | None = None) -> None:
        self._by_ref: dict[str, Citation] = {}
        self.new: dict[str, dict[str, str]] = {}
        for entity in (stored or {}).values():
            self._add(entity, remember=False)

    def _add(self, entity: dict[str, Any], *, remember: bool) -> None:
        citation = Citation(id=entity["id"], key=entity["key"], type=entity["type"], name=entity["name"])
        if citation.id not in self._by_ref and remember:
            self.new[citation.id] = citation.model_dump()
        self._by_ref.setdefault(citation.id, citation)
        self._by_ref.setdefault(citation.key, citation)

    def add_result(self, result: Any) -> None:
        for entity in iter_entities(result):
            self._add(entity, remember=True)

    def get(self, ref: str) -> Citation | None:
        return self._by_ref.get(ref)

    def __len__(self) -> int:
        return len({c.id for c in self._by_ref.values()})


def _may_become_link(text: str) -> bool:
    """Whether ``text`` (starting with '[') is a prefix of a possible entity link."""
    close = text.find("]")
    if close == -1:
        label = text[1:]
        return len(label) <= MAX_LABEL and "\n" not in label and "[" not in label
    rest = text[close + 1 :]
    if len(rest) <= len(PREFIX):
        return PREFIX.startswith(rest)
    if not rest.startswith(PREFIX):
        return False
    ref = rest[len(PREFIX) :]
    return ")" not in ref and len(ref) <= MAX_REF and not any(ch.isspace() or ch == "(" for ch in ref)


class CitationFilter:
    """Rewrite entity links in streamed text; ``feed`` returns what may be sent now."""

    def __init__(self, known: KnownEntities) -> None:
        self.known = known
        self.citations: list[Citation] = []
        self._pending = ""

    def _rewrite(self, match: re.Match[str]) -> str:
        label, ref = match.group(1), match.group(2)
        citation = self.known.get(ref)
        if citation is None:
            return label
        if all(c.id != citation.id for c in self.citations):
            self.citations.append(citation)
        return f"[{label}](entity:{citation.id})"

    def feed(self, delta: str) -> str:
        buf = self._pending + delta
        out: list[str] = []
        while buf:
            start = buf.find("[")
            if start == -1:
                out.append(buf)
                buf = ""
                break
            out.append(buf[:start])
            buf = buf[start:]
            match = LINK.match(buf)
            if match:
                out.append(self._rewrite(match))
                buf = buf[match.end() :]
                continue
            if _may_become_link(buf):
                break
            out.append("[")
            buf = buf[1:]
        self._pending = buf
        return "".join(out)

    def flush(self) -> str:
        """Release whatever is held back (the stream ended)."""
        rest, self._pending = self._pending, ""
        return rest


def check_citations(text: str, known: KnownEntities) -> tuple[str, list[Citation]]:
    """Rewrite a whole text at once; the same result as streaming it through ``CitationFilter``."""
    f = CitationFilter(known)
    out = f.feed(text) + f.flush()
    return out, f.citations

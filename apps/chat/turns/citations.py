"""Checked citations: an ``entity:<id>`` (or ``passage:<id>``) survives only for entities (passages)
a tool returned.

The agent is told to cite entities as Markdown links. A link to an id no tool returned in this
conversation is turned into plain text (its label), and every other unknown ``entity:<ref>`` is
removed, whatever its form: ``[entity:<ref>]``, ``(entity:<ref>)``, bare in the text or inside a
code block (small models write made-up ids like that). Known refs in those forms stay as they are.
This happens *while streaming*, so the tokens a client receives concatenate to exactly the
persisted answer: ``CitationFilter`` holds back only the text that may still become one of these
forms, and decides each one exactly as it would over the whole text.

A passage of a document (``search_passages``) is cited the same way with its own link kind,
``[label](passage:<id>)``, and checked against the passages tools returned; entity refs and
passage ids never stand for each other.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from apps.chat.streams.frames import Citation

MAX_LABEL = 300
MAX_REF = 200
ENTITY, PASSAGE = "entity", "passage"
SCHEMES = (ENTITY, PASSAGE)
BARES = tuple(f"{scheme}:" for scheme in SCHEMES)
PREFIXES = tuple(f"({bare}" for bare in BARES)
SNIPPET_CHARS = 200
# Characters that end a bare ref; sentence punctuation at its end is not part of it either.
REF_STOP = frozenset("()[]{}<>\"'`,;|*")
TRAILING = frozenset(".:!?")
LINK = re.compile(rf"\[([^\[\]\n]{{1,{MAX_LABEL}}})\]\(entity:([^()\s]{{1,{MAX_REF}}})\)")
PASSAGE_LINK = re.compile(rf"\[([^\[\]\n]{{1,{MAX_LABEL}}})\]\(passage:([^()\s]{{1,{MAX_REF}}})\)")
ANY_LINK = re.compile(rf"\[([^\[\]\n]{{1,{MAX_LABEL}}})\]\((entity|passage):([^()\s]{{1,{MAX_REF}}})\)")


def iter_passages(value: Any) -> Iterator[dict[str, Any]]:
    """Yield every passage-shaped object (``id``, ``document_id``, ``document_name``, ``text``)."""
    if isinstance(value, dict):
        if all(isinstance(value.get(k), str) for k in ("id", "document_id", "document_name", "text")):
            yield value
        for child in value.values():
            yield from iter_passages(child)
    elif isinstance(value, list):
        for child in value:
            yield from iter_passages(child)


def passage_citation(passage: dict[str, Any]) -> Citation:
    """How a cited passage is shown: its document's name and the start of its text."""
    text = " ".join(str(passage.get("text", passage.get("snippet", ""))).split())
    snippet = text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1].rstrip() + "…"
    # The passage's keys beyond an entity's are the model's extra keys (``Citation`` allows them).
    return Citation.model_validate(
        {
            "id": passage["id"],
            "key": f"passage:{passage['id']}",
            "type": "passage",
            "name": passage.get("document_name", passage.get("name", "")),
            "kind": PASSAGE,
            "documentId": passage.get("document_id", passage.get("documentId")),
            "page": passage.get("page"),
            "snippet": snippet,
        }
    )


def is_passage(citation: Citation) -> bool:
    """Whether a citation names a passage of a document (not an entity)."""
    return (citation.model_extra or {}).get("kind") == PASSAGE


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
    """Entities returned by tools in a conversation, by id and by key, and passages, by id.

    Built from the conversation's stored map (``{id: {id, key, type, name}}``, a passage's entry with
    ``kind: "passage"``); what tools return during the turn is added, and ``new`` is what the turn
    learnt, to be stored with its answer.
    """

    def __init__(self, stored: dict[str, dict[str, Any]] | None = None) -> None:
        self._by_ref: dict[str, Citation] = {}
        self._passages: dict[str, Citation] = {}
        self.new: dict[str, dict[str, Any]] = {}
        for entity in (stored or {}).values():
            if entity.get("kind") == PASSAGE:
                self._passages.setdefault(entity["id"], Citation.model_validate(entity))
            else:
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
        for passage in iter_passages(result):
            if passage["id"] not in self._passages:
                citation = passage_citation(passage)
                self._passages[citation.id] = citation
                self.new[citation.id] = citation.model_dump()

    def get(self, ref: str, scheme: str = ENTITY) -> Citation | None:
        if scheme == PASSAGE:
            return self._passages.get(ref)
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
    prefix = next((p for p in PREFIXES if rest.startswith(p)), None)
    if prefix is None:
        return any(p.startswith(rest) for p in PREFIXES)
    ref = rest[len(prefix) :]
    return ")" not in ref and len(ref) <= MAX_REF and not any(ch.isspace() or ch == "(" for ch in ref)


def _is_ref_char(ch: str) -> bool:
    return not (ch.isspace() or ch in REF_STOP)


def _ref_run(text: str, start: int) -> int:
    """The end of the run of ref characters that starts at ``start``."""
    end = start
    while end < len(text) and _is_ref_char(text[end]):
        end += 1
    return end


def _may_become_enclosed(text: str, close: str) -> bool:
    """Whether ``text`` (starting with '[' or '(') is a prefix of ``[entity:<ref>]`` / ``(entity:<ref>)``."""
    rest = text[1:]
    bare = next((b for b in BARES if rest.startswith(b)), None)
    if bare is None:
        return any(b.startswith(rest) for b in BARES)
    ref = rest[len(bare) :]
    return len(ref) <= MAX_REF and all(_is_ref_char(ch) for ch in ref)


# What ``_scan`` says about the text at one position.
_WAIT = "wait"  # it may still become a citation form: hold it back
_PLAIN = "plain"  # it is not one: release one character


class CitationFilter:
    """Rewrite entity links and drop unknown entity refs in streamed text; ``feed`` returns what may be sent now."""

    def __init__(self, known: KnownEntities) -> None:
        self.known = known
        self.citations: list[Citation] = []
        self._pending = ""
        self._before = ""  # the input character just before ``_pending`` (for word boundaries)

    def _cite(self, label: str, scheme: str, ref: str) -> str:
        label = self._strip(label)
        citation = self.known.get(ref, scheme)
        if citation is None:
            return label
        self._cited(citation)
        return f"[{label.strip() or citation.name}]({scheme}:{citation.id})"

    def _cited(self, citation: Citation) -> None:
        if all(c.id != citation.id for c in self.citations):
            self.citations.append(citation)

    def _strip(self, text: str) -> str:
        """``text`` with its unknown refs removed (a finished piece: nothing is held back)."""
        out, _ = self._run(text, before="[", final=True)
        return out

    def _enclosed(self, buf: str, i: int, close: str, final: bool) -> tuple[str, int] | str:
        """``[entity:<ref>]`` or ``(entity:<ref>)`` (or ``passage:``) at ``i``: removed when ``ref`` is
        unknown; ``(entity:<ref>)`` is removed when known too, and cites it."""
        bare = next((b for b in BARES if buf.startswith(b, i + 1)), None)
        if bare is not None:
            head = i + 1 + len(bare)
            end = _ref_run(buf, head)
            if end < len(buf) and buf[end] == close and 0 < end - head <= MAX_REF:
                ref = buf[head:end]
                known = self.known.get(ref, bare[:-1])
                if known is not None and close == ")":
                    # "Asmara (entity:<id>)": the link a small model wrote without its brackets
                    # (plain chat's prompt lists each entity as its link). The entity is cited;
                    # its id is not for the reader.
                    self._cited(known)
                    return "", end + 1
                return ("" if known is None else buf[i : end + 1]), end + 1
        if not final and _may_become_enclosed(buf[i:], close):
            return _WAIT
        return _PLAIN

    def _bare(self, buf: str, i: int, final: bool) -> tuple[str, int] | str:
        """A bare ``entity:<ref>`` (or ``passage:<id>``) at ``i``; sentence punctuation right after it
        is not part of it."""
        bare = ENTITY + ":" if buf[i] == "e" else PASSAGE + ":"
        if not buf.startswith(bare, i):
            return _WAIT if not final and bare.startswith(buf[i:]) else _PLAIN
        head = i + len(bare)
        end = _ref_run(buf, head)
        if end == len(buf) and not final and end - head <= MAX_REF:
            return _WAIT
        while end > head and buf[end - 1] in TRAILING:
            end -= 1
        if not 0 < end - head <= MAX_REF:
            return _PLAIN
        ref = buf[head:end]
        return ("" if self.known.get(ref, bare[:-1]) is None else buf[i:end]), end

    def _scan(self, buf: str, i: int, before: str, final: bool) -> tuple[str, int] | str:
        ch = buf[i]
        if ch == "[":
            match = ANY_LINK.match(buf, i)
            if match:
                return self._cite(match.group(1), match.group(2), match.group(3)), match.end()
            link_possible = not final and _may_become_link(buf[i:])
            found = self._enclosed(buf, i, "]", final)
            if isinstance(found, tuple):
                end = found[1]
                # "[entity:x]" may still be the label of a link "[entity:x](entity:y)".
                if link_possible and (end == len(buf) or buf[end] == "("):
                    return _WAIT
                return found
            return _WAIT if link_possible or found == _WAIT else _PLAIN
        if ch == "(":
            return self._enclosed(buf, i, ")", final)
        if ch in "ep" and not (before.isalnum() or before == "_"):
            return self._bare(buf, i, final)
        return _PLAIN

    def _run(self, buf: str, *, before: str, final: bool) -> tuple[str, int]:
        """Process ``buf``: (the text to send, how many characters of ``buf`` it used)."""
        out: list[str] = []
        i = 0
        plain_from = 0
        while i < len(buf):
            ch = buf[i]
            if ch not in "[(ep":
                i += 1
                continue
            found = self._scan(buf, i, buf[i - 1] if i else before, final)
            if found == _PLAIN:
                i += 1
                continue
            out.append(buf[plain_from:i])
            if found == _WAIT:
                return "".join(out), i
            assert isinstance(found, tuple)
            out.append(found[0])
            i = plain_from = found[1]
        out.append(buf[plain_from:])
        return "".join(out), len(buf)

    def feed(self, delta: str) -> str:
        buf = self._pending + delta
        out, used = self._run(buf, before=self._before, final=False)
        if used:
            self._before = buf[used - 1]
        self._pending = buf[used:]
        return out

    def flush(self) -> str:
        """Release whatever is held back (the stream ended), with the same rules."""
        out, _ = self._run(self._pending, before=self._before, final=True)
        self._pending = ""
        return out


def check_citations(text: str, known: KnownEntities) -> tuple[str, list[Citation]]:
    """Rewrite a whole text at once; the same result as streaming it through ``CitationFilter``."""
    f = CitationFilter(known)
    out = f.feed(text) + f.flush()
    return out, f.citations

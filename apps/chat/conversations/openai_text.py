"""How a kgchat turn reads in an OpenAI-compatible client's thread (``/v1``, docs/protocol.md).

The answer's ``entity:`` and ``passage:`` links become links to kgchat's pages, as they stream;
its citations are listed after it as links; tool calls are told as reasoning (one line each);
an approval the agent asks for is told with how to answer it in the thread.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

from apps.chat.streams.frames import ApprovalRequiredFrame, Citation, McpToolFrame
from apps.chat.turns.citations import MAX_REF, iter_passages

# ``](entity:<ref>)`` or ``](passage:<id>)``: the target of a Markdown link kgchat's page resolves.
_TARGET = re.compile(rf"\]\((entity|passage):([^()\s]{{1,{MAX_REF}}})\)")
# What may still become such a target once more text comes (from a "]" to the end of the text so far):
# held back until it is decided.
_PREFIXES = sorted(
    {w[:n] for w in ("(entity", "(passage") for n in range(1, len(w) + 1)}, key=len, reverse=True
)
_OPEN_TARGET = re.compile(
    r"\](?:\((?:entity|passage):[^()\s]{0,"
    + str(MAX_REF)
    + "}|"
    + "|".join(re.escape(p) for p in _PREFIXES)
    + ")?$"
)
_OPEN_SPAN = MAX_REF + len("](passage:")
ARGUMENT_CHARS = 200


class Pages:
    """The addresses of kgchat's pages a thread links to, under ``base`` (scheme and host)."""

    def __init__(self, base: str, *, conversation_id: str, project_id: str) -> None:
        self.base = base.rstrip("/")
        self.conversation_id = conversation_id
        self.project_id = project_id

    def conversation(self) -> str:
        return f"{self.base}/chat/{self.conversation_id}/"

    def entity(self, ref: str) -> str:
        """The conversation's page with the entity's panel open."""
        return f"{self.conversation()}#entity-{quote(ref, safe='')}"

    def passage(self, ref: str, document_id: str | None = None) -> str:
        """The page of the passage's document when it is known, else the conversation's page at
        the passage (its card under the answer)."""
        if document_id:
            return self.document(document_id)
        return f"{self.conversation()}#passage-{quote(ref, safe='')}"

    def document(self, document_id: str) -> str:
        """The page of a document's mentions (its passages, grouped by the names they hold)."""
        return f"{self.base}/projects/{self.project_id}/documents/{quote(document_id, safe='')}/mentions"


class LinkRewriter:
    """Rewrite the link targets of streamed text, holding back only what may still become one."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self._pending = ""
        # The refs the answer linked in its text (the sources after it need not repeat them).
        self.linked: set[str] = set()
        # The documents of the passages the turn's tools returned, by passage id.
        self.documents: dict[str, str] = {}

    def learn(self, result: Any) -> None:
        """Note the documents of the passages a tool returned (their links go to those pages)."""
        for passage in iter_passages(result):
            self.documents[passage["id"]] = passage["document_id"]

    def _rewrite(self, text: str) -> str:
        def target(match: re.Match[str]) -> str:
            kind, ref = match.group(1), match.group(2)
            self.linked.add(ref)
            url = (
                self.pages.entity(ref)
                if kind == "entity"
                else self.pages.passage(ref, self.documents.get(ref))
            )
            return f"]({url})"

        return _TARGET.sub(target, text)

    def feed(self, text: str) -> str:
        """The text that is decided once ``text`` is added; the rest waits for more."""
        pending = self._pending + text
        cut = len(pending)
        for at in range(max(0, len(pending) - _OPEN_SPAN), len(pending)):
            if pending[at] == "]" and _OPEN_TARGET.match(pending, at):
                cut = at
                break
        self._pending = pending[cut:]
        return self._rewrite(pending[:cut])

    def flush(self) -> str:
        """What is held back, at the end of the answer."""
        pending, self._pending = self._pending, ""
        return self._rewrite(pending)


def _compact(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    return text if len(text) <= ARGUMENT_CHARS else text[: ARGUMENT_CHARS - 1] + "…"


def _result_summary(result: Any) -> str:
    if isinstance(result, dict):
        for key in ("results", "edges", "nodes", "types", "relationship_types", "passages"):
            if isinstance(result.get(key), list):
                count, noun = len(result[key]), key.replace("_", " ")
                return f"{count} {noun if count != 1 else noun.removesuffix('s')}"
    return "done"


def tool_line(frame: McpToolFrame) -> str:
    """One line of reasoning for a tool call's chip: started, completed or failed."""
    if frame.status == "started":
        return f"Calling `{frame.tool}` {_compact(frame.input or {})}\n"
    if frame.status == "completed":
        return f"`{frame.tool}`: {_result_summary(frame.result)}\n"
    return f"`{frame.tool}` failed: {frame.error or 'error'}\n"


def approval_text(frame: ApprovalRequiredFrame, pages: Pages) -> str:
    """The approval the agent waits for, and how to give it from the thread."""
    asked = f"\n\n**Approval needed**: the agent wants to run `{frame.tool}` {_compact(frame.arguments)}.\n\n"
    if frame.canDecide:
        how = (
            "Reply **approve** or **reject** (a reason may follow, as in `reject: not this one`), "
            f"or decide in kgchat: [the conversation]({pages.conversation()})."
        )
    else:
        how = f"An editor or owner of the project decides it in kgchat: [the conversation]({pages.conversation()})."
    return asked + how


def sources_text(citations: list[Citation], pages: Pages, *, linked: frozenset[str] = frozenset()) -> str:
    """The answer's citations its text did not link (``linked``: the refs it did, ids or keys),
    as links to their pages, after the answer (empty when none): a passage by its document's page."""
    links: list[str] = []
    seen: set[str] = set()
    for c in citations:
        extra = c.model_extra or {}
        if c.id in seen or c.id in linked or c.key in linked:
            continue
        seen.add(c.id)
        if extra.get("kind") == "passage" and extra.get("documentId"):
            page = f", p. {extra['page']}" if extra.get("page") else ""
            links.append(f"[{_label(c.name)}{page}]({pages.document(str(extra['documentId']))})")
        elif extra.get("kind") == "passage":
            links.append(f"[{_label(c.name)}]({pages.passage(c.id)})")
        else:
            links.append(f"[{_label(c.name or c.key)}]({pages.entity(c.id)})")
    return "\n\nSources: " + ", ".join(links) if links else ""


def _label(text: str) -> str:
    """A link's label: brackets that would end it early taken out."""
    return " ".join(text.replace("[", "(").replace("]", ")").split()) or "source"

"""One conversation as a document: Markdown for people, JSON for programs; and safe HTML for the share page.

Markdown: each user message and answer under a heading, ``entity:`` links replaced by the entity's
name, tool calls (with their results) as collapsible ``<details>`` blocks. JSON: the stored
messages as the REST API shows them, plus each answer's run id.
"""

from __future__ import annotations

import html
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.utils import timezone
from markdown_it import MarkdownIt

from apps.chat.models import Conversation, Message, MessageRole
from apps.chat.selectors import conversation_get, message_list
from apps.chat.turns.citations import LINK, PASSAGE_LINK
from apps.core.times import json_time
from apps.graph_tools.models import GraphObject
from apps.projects.selectors import Principal, parse_uuid

EXPORT_FORMATS = ("markdown", "json")
# ``[entity:<ref>]`` and ``(entity:<ref>)`` that the citation filter kept (known entities).
_BRACKETED = re.compile(r"[\[(]entity:([^\[\]()\s]{1,200})[\])]")


@dataclass(frozen=True)
class ExportDocument:
    filename: str
    content_type: str
    body: str


def run_id_of(message: Message) -> str | None:
    context = message.retrieval_context
    run_id = context.get("agent_run_id") if isinstance(context, dict) else None
    return str(run_id) if parse_uuid(run_id) else None


class EntityNames:
    """Names of a project's entities by id or key, looked up once per conversation."""

    def __init__(self, conversation: Conversation, messages: list[Message]) -> None:
        self.names: dict[str, str] = {}
        refs: set[str] = set()
        for m in messages:
            for c in m.citations or []:
                if isinstance(c, dict) and c.get("name"):
                    for k in ("id", "key"):
                        if c.get(k):
                            self.names[str(c[k])] = str(c["name"])
            if m.role == MessageRole.ASSISTANT:
                refs.update(ref for _, ref in LINK.findall(m.content))
                refs.update(_BRACKETED.findall(m.content))
        refs -= set(self.names)
        ids = [u for u in (parse_uuid(r) for r in refs) if u is not None]
        rows = GraphObject.objects.filter(project_id=conversation.project_id)
        for obj_id, key, name in rows.filter(id__in=ids).values_list("id", "key", "name"):
            self.names[str(obj_id)] = name
            self.names[key] = name
        for key, name in rows.filter(key__in=[r for r in refs if parse_uuid(r) is None]).values_list(
            "key", "name"
        ):
            self.names[key] = name

    def resolve(self, text: str) -> str:
        """``text`` with every entity link and reference replaced by the entity's name (or its label),
        and every passage link by its label."""
        text = LINK.sub(lambda m: self.names.get(m.group(2), m.group(1)), text)
        text = PASSAGE_LINK.sub(lambda m: m.group(1), text)
        return _BRACKETED.sub(lambda m: self.names.get(m.group(1), m.group(1)), text)


def _fence(text: str, lang: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _tool_results(messages: list[Message]) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for m in messages:
        if m.role == MessageRole.TOOL:
            for call in m.tool_calls or []:
                if isinstance(call, dict) and call.get("id"):
                    results[str(call["id"])] = call
    return results


def _details(call: dict[str, Any], result: dict[str, Any] | None) -> str:
    name = html.escape(str(call.get("name") or "tool"))
    parts = [
        f"<details>\n<summary>Tool call: {name}</summary>\n",
        "Input:\n",
        _fence(_json_text(call.get("input")), "json"),
    ]
    done = result or call
    if done.get("error"):
        parts += ["\nError:\n", _fence(str(done["error"]))]
    elif "output" in done and done.get("output") is not None:
        parts += ["\nResult:\n", _fence(_json_text(done["output"]), "json")]
    parts.append("\n</details>")
    return "\n".join(parts)


def markdown_render(conversation: Conversation, messages: list[Message]) -> str:
    names = EntityNames(conversation, messages)
    results = _tool_results(messages)
    out = [
        f"# {conversation.title or 'Conversation'}",
        "",
        f"Exported {timezone.now():%Y-%m-%d %H:%M} UTC",
        "",
    ]
    for m in messages:
        if m.role == MessageRole.TOOL:
            continue
        if m.role == MessageRole.USER:
            out += [f"## You · {m.created_at:%Y-%m-%d %H:%M}", "", m.content, ""]
            continue
        if m.tool_calls:
            out += [_details(c, results.get(str(c.get("id")))) for c in m.tool_calls if isinstance(c, dict)]
            out.append("")
        if m.content:
            out += [f"## Assistant · {m.created_at:%Y-%m-%d %H:%M}", "", names.resolve(m.content), ""]
    return "\n".join(out).rstrip() + "\n"


def message_json(m: Message) -> dict[str, Any]:
    return {
        "id": str(m.id),
        "role": m.role,
        "content": m.content,
        "toolCalls": m.tool_calls or [],
        "retrievalContext": m.retrieval_context,
        "citations": m.citations or [],
        "runId": run_id_of(m),
        "createdAt": json_time(m.created_at),
    }


def json_render(conversation: Conversation, messages: list[Message]) -> str:
    document = {
        "conversation": {
            "id": str(conversation.id),
            "projectId": str(conversation.project_id),
            "title": conversation.title,
            "agentDefinitionId": str(conversation.agent_definition_id)
            if conversation.agent_definition_id
            else None,
            "createdAt": json_time(conversation.created_at),
            "updatedAt": json_time(conversation.updated_at),
        },
        "messages": [message_json(m) for m in messages],
        "runIds": list(dict.fromkeys(r for r in (run_id_of(m) for m in messages) if r)),
        "exportedAt": json_time(timezone.now()),
    }
    return json.dumps(document, ensure_ascii=False, indent=2)


def conversation_export(*, principal: Principal, conversation_id: object, format: str) -> ExportDocument:
    """One of my conversations as a Markdown or JSON document."""
    conversation = conversation_get(principal=principal, conversation_id=conversation_id)
    messages = list(message_list(conversation=conversation))
    stem = f"conversation-{conversation.id}"
    if format == "json":
        return ExportDocument(
            f"{stem}.json", "application/json; charset=utf-8", json_render(conversation, messages)
        )
    return ExportDocument(
        f"{stem}.md", "text/markdown; charset=utf-8", markdown_render(conversation, messages)
    )


# The share page: CommonMark without raw HTML (anything HTML-like in a message is shown as text);
# markdown-it refuses javascript:, vbscript:, file: and data: links. Images are off, as in the chat
# page's renderer: an image in a message would make every reader's browser fetch a URL it names.
_MD = MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")


@dataclass(frozen=True)
class SharedMessage:
    id: uuid.UUID
    role: str
    html: str
    tool_names: list[str]
    created_at: Any


def shared_messages(conversation: Conversation) -> list[SharedMessage]:
    """The conversation's user messages and answers as safe HTML (entity links shown as names)."""
    messages = list(message_list(conversation=conversation))
    names = EntityNames(conversation, messages)
    shown = []
    for m in messages:
        if m.role == MessageRole.TOOL or (
            m.role == MessageRole.ASSISTANT and not m.content and not m.tool_calls
        ):
            continue
        text = names.resolve(m.content) if m.role == MessageRole.ASSISTANT else m.content
        tools = [str(c.get("name")) for c in m.tool_calls or [] if isinstance(c, dict)]
        shown.append(SharedMessage(m.id, m.role, _MD.render(text) if text else "", tools, m.created_at))
    return shown

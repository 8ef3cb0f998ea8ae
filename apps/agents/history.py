"""Conversation history as the agents layer sees it: typed records and the store protocol.

The chat layer owns ``kb.chat_messages``: it loads a turn's history window when it admits the
message and stores the turn's new messages with the answer, in one transaction, once the turn
ends (so a failed, cancelled or deleted turn stores nothing). The executor therefore runs ADK's
session over ``InMemoryHistoryStore`` seeded with that history; there is no database-backed
``HistoryStore``. ``history_window`` applies the message-count limit and the token budget with
the sequence-safety rules of ``specs/adk-integration.requirements.md``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field, field_validator

DEFAULT_HISTORY_LIMIT = 10
DEFAULT_TOKEN_BUDGET = 32000


class HistoryToolCall(BaseModel):
    """A tool call on an assistant message, or the result of one on a tool message."""

    id: str
    name: str
    input: dict[str, Any] | None = None
    output: Any = None
    error: str | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _parse_input(cls, value: Any) -> Any:
        # Older rows store the arguments as a JSON string.
        if isinstance(value, str):
            try:
                parsed = json.loads(value) if value.strip() else {}
            except ValueError:
                return {"raw": value}
            return parsed if isinstance(parsed, dict) else {"value": parsed}
        return value


class HistoryMessage(BaseModel):
    """One stored message. ``role`` is ``user``, ``assistant`` or ``tool`` (older rows may say otherwise)."""

    role: str
    content: str = ""
    tool_calls: list[HistoryToolCall] = Field(default_factory=list)
    author: str = ""


class HistoryStore(Protocol):
    """Where a session's messages live. ``load`` returns at most ``limit`` newest messages, oldest first."""

    async def load(self, session_id: str, *, limit: int | None = None) -> list[HistoryMessage]: ...

    async def append(self, session_id: str, message: HistoryMessage) -> None: ...


class InMemoryHistoryStore:
    """A ``HistoryStore`` in a dict of lists; appends are O(1), loads copy only the window."""

    def __init__(self, initial: dict[str, Sequence[HistoryMessage]] | None = None) -> None:
        self._messages: dict[str, list[HistoryMessage]] = {k: list(v) for k, v in (initial or {}).items()}

    async def load(self, session_id: str, *, limit: int | None = None) -> list[HistoryMessage]:
        messages = self._messages.get(session_id, [])
        return list(messages[-limit:]) if limit else list(messages) if limit is None else []

    async def append(self, session_id: str, message: HistoryMessage) -> None:
        self._messages.setdefault(session_id, []).append(message)

    def messages(self, session_id: str) -> list[HistoryMessage]:
        return list(self._messages.get(session_id, []))


def estimate_tokens(message: HistoryMessage) -> int:
    """Estimate a message's tokens: four characters a token, plus a little per message and call."""
    chars = len(message.content)
    for call in message.tool_calls:
        chars += len(call.name)
        if call.input:
            chars += len(json.dumps(call.input, default=str))
        if call.output is not None and not message.content:
            chars += len(json.dumps(call.output, default=str))
    return 4 + (chars + 3) // 4


def _is_tool(message: HistoryMessage) -> bool:
    return message.role in {"tool", "function"}


def _calls(message: HistoryMessage) -> list[HistoryToolCall]:
    return message.tool_calls if message.role in {"assistant", "model"} else []


def _answered(messages: Sequence[HistoryMessage], start: int) -> bool:
    """Whether every call of the assistant message at ``start`` is answered by the tool messages after it."""
    wanted = {c.id for c in _calls(messages[start])}
    seen: set[str] = set()
    positional = 0
    for message in messages[start + 1 :]:
        if not _is_tool(message):
            break
        if message.tool_calls:
            seen.update(c.id for c in message.tool_calls)
        else:
            positional += 1
    return wanted <= seen or len(wanted) <= len(seen) + positional


def history_window(
    messages: Sequence[HistoryMessage], *, limit: int = DEFAULT_HISTORY_LIMIT, token_budget: int = 0
) -> list[HistoryMessage]:
    """Keep the newest messages within ``limit`` messages and ``token_budget`` tokens (0 → 32000).

    Messages are taken from the most recent backwards until the budget is spent. Only when that
    dropped something, the window is made safe to start from: leading tool results are skipped,
    and an assistant tool call whose results did not all survive is dropped with them; a trailing
    unanswered call is then dropped too. Without truncation a trailing call stays (its result is pending).
    """
    budget = token_budget if token_budget > 0 else DEFAULT_TOKEN_BUDGET
    limit = limit if limit > 0 else DEFAULT_HISTORY_LIMIT
    candidates = messages[-limit:]
    kept: list[HistoryMessage] = []
    spent = 0
    for message in reversed(candidates):
        cost = estimate_tokens(message)
        if spent + cost > budget:
            break
        spent += cost
        kept.append(message)
    kept.reverse()
    if len(kept) == len(messages):
        return kept
    start = 0
    while start < len(kept):
        if _is_tool(kept[start]):
            start += 1
        elif _calls(kept[start]) and not _answered(kept, start):
            start += 1
        else:
            break
    window = kept[start:]
    if window and _calls(window[-1]) and not _answered(window, len(window) - 1):
        window.pop()
    return window

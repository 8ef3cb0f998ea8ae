"""What each consumer of a tool result gets of it (issue #47): its own limit, from the whole result.

A tool (a graph tool, an external MCP server's, a decided write) answers with its whole result,
and the whole result is what ADK's session holds (``kb.agent_run_events``) and what the audit
trail keeps (``kb.agent_run_tool_calls.output``, ``kb.agent_run_messages``). From there:

- the **model** is given at most ``KGCHAT_TOOL_RESULT_MAX_CHARS`` (``model_text``): the model
  adapter applies it to every function response of every request, whichever way the result came
  (a call just run, a decided approval, a run resumed from its stored events, the history), so
  the native-tools path and the small-model loop (a provider beneath the adapter) see the same;
- the **conversation's tool rows** (``kb.chat_messages``, the next turn's history) hold the
  model's copy (``as_the_model_saw``): the next turn reads what the model read, and one long
  result does not push the rest of the conversation out of the history window's token budget;
- the **browser** (the ``mcp_tool`` frame) gets the whole result, or past
  ``KGCHAT_FRAME_RESULT_MAX_CHARS`` ``{"truncated": true, "preview": …}`` (``apps.chat.turns.agent_turn``);
- the MCP server and the REST tool route answer the whole result (they never come here).
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from apps.agents.history import HistoryMessage

SHORTENED_NOTE = "result shortened to fit the context; ask for fewer results or narrow the query"


def result_text(result: Any) -> str:
    """A tool result as JSON text (``{}`` for none), as the model and the history read it."""
    return json.dumps(result if result is not None else {}, default=str, ensure_ascii=False)


def _size(value: Any) -> int:
    return len(json.dumps(value, default=str, ensure_ascii=False))


def shrink_result(result: Any, *, max_chars: int) -> Any:
    """``result`` within ``max_chars`` of JSON: the longest lists of a dict halved until it fits.

    A shortened result says so (``truncated``, and a ``note`` to ask for less); one that cannot be
    shortened so (no list, or what is left still too long) becomes ``{truncated, preview}``.
    """
    if max_chars <= 0 or _size(result) <= max_chars:
        return result
    if isinstance(result, dict):
        shrunk = dict(result)
        while _size(shrunk) > max_chars:
            lists = [(len(v), k) for k, v in shrunk.items() if isinstance(v, list) and v]
            if not lists:
                break
            _, key = max(lists)
            shrunk[key] = shrunk[key][: len(shrunk[key]) // 2]
        shrunk["truncated"] = True
        shrunk["note"] = SHORTENED_NOTE
        if _size(shrunk) <= max_chars:
            return shrunk
    text = json.dumps(result, default=str, ensure_ascii=False)
    return {"truncated": True, "preview": text[:max_chars]}


def model_copy(result: Any) -> Any:
    """The result as the model is given it: whole up to ``KGCHAT_TOOL_RESULT_MAX_CHARS``, else shrunk."""
    return shrink_result(result, max_chars=settings.KGCHAT_TOOL_RESULT_MAX_CHARS)


def model_text(result: Any) -> str:
    """``model_copy`` as JSON text; a result within the limit is serialised once."""
    text = result_text(result)
    limit = settings.KGCHAT_TOOL_RESULT_MAX_CHARS
    if limit <= 0 or len(text) <= limit:
        return text
    return result_text(model_copy(result))


def as_the_model_saw(message: HistoryMessage) -> HistoryMessage:
    """A run's message as the conversation keeps it: a tool message's results as the model's copy."""
    if message.role != "tool":
        return message
    copies = [model_copy(c.output) if c.output is not None else None for c in message.tool_calls]
    if all(copy is c.output for copy, c in zip(copies, message.tool_calls, strict=True)):
        return message
    calls = [
        c.model_copy(update={"output": copy}) for copy, c in zip(copies, message.tool_calls, strict=True)
    ]
    content = "\n".join(result_text(c.output) for c in calls)
    return message.model_copy(update={"tool_calls": calls, "content": content})

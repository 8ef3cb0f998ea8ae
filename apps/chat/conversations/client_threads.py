"""Which conversation an OpenAI-compatible client's request goes on (``/v1``, docs/protocol.md).

Such a client keeps its own thread and resends all of it with every message; kgchat keeps the
conversation. A thread is found by one of two keys, each per user and model (``ClientThread``):

- an id the client names the thread with (``X-Kgchat-Conversation``): one of my conversations'
  ids is that conversation; any other value (LibreChat's or Open WebUI's own chat id) is a
  key of its own, so the client need not know kgchat's ids;
- else the earlier messages (system messages left out), as kgchat answered them: recorded when
  an answer is sent, looked up when the client resends them with its next message.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Sequence

from django.db import IntegrityError

from apps.chat import selectors
from apps.chat.models import ClientThread, Conversation
from apps.core.db import release_connections
from apps.projects.selectors import Principal, parse_uuid

# A client may fold its own renderings into the text it resends (Open WebUI keeps a reasoning
# block in the message as ``<details type="reasoning">``); they are not part of the thread's key.
_DETAILS = re.compile(r"<details\b[^>]*>.*?</details>", re.DOTALL | re.IGNORECASE)


def turn_text(content: str) -> str:
    """A message's text as the thread's key reads it: without ``<details>`` blocks, its runs
    of white space as one space."""
    return " ".join(_DETAILS.sub(" ", content).split())


def history_key(*, user_id: int, model: str, messages: Sequence[tuple[str, str]]) -> str:
    """The key of a thread whose earlier messages are ``messages`` (role, text), oldest first."""
    kept = [[role, turn_text(text)] for role, text in messages if role in ("user", "assistant")]
    return _digest(["history", user_id, model, kept])


def named_key(*, user_id: int, model: str, name: str) -> str:
    """The key of a thread the client names ``name`` (a header's value)."""
    return _digest(["named", user_id, model, name.strip()])


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode()).hexdigest()


def thread_find(*, principal: Principal, name: str | None, keys: Sequence[str]) -> Conversation | None:
    """The conversation a request goes on: the one ``name`` is the id of (mine), else the
    first of ``keys`` recorded for one of my conversations; None: a new conversation."""
    try:
        named = parse_uuid(name) if name else None
        if named is not None:
            mine = selectors.conversation_list(principal=principal).filter(id=named).first()
            if mine is not None:
                return mine
        found = {
            t.key: t.conversation_id
            for t in ClientThread.objects.filter(
                key__in=list(keys),
                conversation__in=selectors.conversation_list(principal=principal),
            )
        }
        for key in keys:
            if key in found:
                return Conversation.objects.get(id=found[key])
        return None
    finally:
        release_connections()


def thread_remember(*, conversation_id: uuid.UUID | str, keys: Sequence[str]) -> None:
    """Record ``keys`` for the conversation (a key seen before now names this one)."""
    try:
        for key in keys:
            try:
                ClientThread.objects.update_or_create(key=key, defaults={"conversation_id": conversation_id})
            except IntegrityError:  # the conversation was deleted meanwhile: nothing to go on
                return
    finally:
        release_connections()

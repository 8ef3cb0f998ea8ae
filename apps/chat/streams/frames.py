"""The wire shapes of a turn: the chat message that starts it (PROTOCOL §2, one model for REST and
websocket) and its stream frames (PROTOCOL §3); typed models, only transports turn them into JSON."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter

from apps.core.inputs import storable


class ChatMessageIn(BaseModel):
    """A user's message: ``POST /api/chat/stream``'s body and the websocket's ``chat.message``.

    ``message`` is left untyped here so that the turn service answers a wrong type with its own
    ``invalid_request``; other keys (the websocket's ``type``) are ignored.
    """

    model_config = ConfigDict(extra="ignore")
    message: Any = None
    projectId: str | None = None
    conversationId: str | None = None
    agentDefinitionId: str | None = None


class Frame(BaseModel):
    seq: int = 0
    # The JSON text of ``wire()`` and the ``seq`` it was encoded with (see ``text``).
    _text: tuple[int, str] | None = PrivateAttr(default=None)

    def wire(self) -> dict[str, Any]:
        """The frame as sent on the wire (camelCase keys, ``seq`` included).

        NUL and unpaired surrogates a model produced are sent as U+FFFD, as they are stored.
        """
        data: dict[str, Any] = storable(self.model_dump(mode="json"))
        return data

    def text(self) -> str:
        """The frame's JSON text, as every transport sends it (a websocket message, an SSE
        ``data:`` line, a Redis stream entry): encoded once, however many sockets send it."""
        cached = self._text
        if cached is None or cached[0] != self.seq:
            cached = (self.seq, json.dumps(self.wire(), ensure_ascii=False))
            self._text = cached
        return cached[1]


class MetaFrame(Frame):
    type: Literal["meta"] = "meta"
    conversationId: str
    messageId: str
    agentDefinitionId: str | None
    runId: str | None
    model: str


class TokenFrame(Frame):
    type: Literal["token"] = "token"
    token: str

    def wire(self) -> dict[str, Any]:
        # The frame of every streamed delta: built directly, in ``model_dump``'s key order.
        return {"seq": self.seq, "type": "token", "token": storable(self.token)}


class McpToolFrame(Frame):
    type: Literal["mcp_tool"] = "mcp_tool"
    tool: str
    callId: str
    status: Literal["started", "completed", "error"]
    input: dict[str, Any] | None = None
    result: Any = None
    error: str | None = None

    def wire(self) -> dict[str, Any]:
        data = super().wire()
        keep = {"started": "input", "completed": "result", "error": "error"}[self.status]
        for key in ("input", "result", "error"):
            if key != keep:
                data.pop(key, None)
        return data


class ErrorFrame(Frame):
    type: Literal["error"] = "error"
    error: str
    code: str


class ApprovalRequiredFrame(Frame):
    """A write tool call waits for a member's decision; the turn ends (``done``) and the decision
    continues it in a new turn. ``canDecide``: whether the conversation's user may decide it."""

    type: Literal["approval_required"] = "approval_required"
    approvalId: str
    tool: str
    callId: str
    arguments: dict[str, Any]
    diff: dict[str, Any]
    expiresAt: str
    canDecide: bool


class Citation(BaseModel):
    """A cited entity (``id, key, type, name``), or a cited passage of a document: ``kind:
    "passage"``, ``type: "passage"``, ``key: "passage:<id>"``, ``name`` the document's name, and
    ``documentId``, ``page``, ``snippet`` (extra keys, kept when a frame is read back)."""

    model_config = ConfigDict(extra="allow")

    id: str
    key: str
    type: str
    name: str


class DoneFrame(Frame):
    type: Literal["done"] = "done"
    messageId: str | None
    runId: str | None
    citations: list[Citation] = Field(default_factory=list)


# How long a finished turn's frames stay available to late subscribers (on every frame bus).
RETENTION_SECONDS = 120.0

# The frames of a turn, in one place: the type, and (by ``type``) how each is read back.
AnyFrame = MetaFrame | TokenFrame | McpToolFrame | ErrorFrame | ApprovalRequiredFrame | DoneFrame
_frames: TypeAdapter[AnyFrame] = TypeAdapter(Annotated[AnyFrame, Field(discriminator="type")])


class ApprovalDecidedFrame(BaseModel):
    """A conversation's approval was decided or found expired: told to every socket watching the
    conversation (not part of a turn, so no ``seq``). ``continued``: a new turn continues the
    conversation (followed like any turn)."""

    type: Literal["approval_decided"] = "approval_decided"
    approvalId: str
    conversationId: str | None
    callId: str = ""
    status: Literal["approved", "rejected", "expired"]
    decidedBy: str | None
    reason: str
    result: Any = None
    continued: bool = False

    def wire(self) -> dict[str, Any]:
        """The event as sent on the wire (camelCase keys, no ``seq``)."""
        data: dict[str, Any] = storable(self.model_dump(mode="json"))
        return data


class TurnStartedFrame(BaseModel):
    """A new message started a turn of the conversation (from any tab, device, API client or
    process): told to every socket watching the conversation but the one that sent it, which then
    follows the turn. ``messageId``, ``content`` and ``createdAt`` are the stored user message's.
    Not part of a turn, so no ``seq``; a turn that continues after a decision is announced by
    ``approval_decided`` (``continued``) instead."""

    type: Literal["turn_started"] = "turn_started"
    conversationId: str
    messageId: str
    content: str
    createdAt: datetime

    def wire(self) -> dict[str, Any]:
        """The event as sent on the wire (camelCase keys, no ``seq``)."""
        data: dict[str, Any] = storable(self.model_dump(mode="json"))
        return data


# What the frame bus tells every watcher of a conversation, between and during turns.
ConversationEvent = ApprovalDecidedFrame | TurnStartedFrame
_events: TypeAdapter[ConversationEvent] = TypeAdapter(
    Annotated[ConversationEvent, Field(discriminator="type")]
)


def event_from_wire(data: dict[str, Any]) -> ConversationEvent:
    """Rebuild a conversation event from its wire form (events cross processes through Redis)."""
    return _events.validate_python(data)


def frame_from_wire(data: dict[str, Any]) -> AnyFrame:
    """Rebuild a frame from its wire form (frames cross process boundaries through Redis)."""
    return _frames.validate_python(data)


def frame_from_text(text: str) -> AnyFrame:
    """Rebuild a frame from its JSON text (``Frame.text``), keeping that text to send as it is."""
    frame = frame_from_wire(json.loads(text))
    frame._text = (frame.seq, text)
    return frame

"""The wire shapes of a turn: the chat message that starts it (PROTOCOL §2, one model for REST and
websocket) and its stream frames (PROTOCOL §3); typed models, only transports turn them into JSON."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from apps.projects.inputs import storable


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

    def wire(self) -> dict[str, Any]:
        """The frame as sent on the wire (camelCase keys, ``seq`` included).

        NUL and unpaired surrogates a model produced are sent as U+FFFD, as they are stored.
        """
        data: dict[str, Any] = storable(self.model_dump(mode="json"))
        return data


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

AnyFrame = MetaFrame | TokenFrame | McpToolFrame | ErrorFrame | ApprovalRequiredFrame | DoneFrame


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


# What the frame bus tells every watcher of a conversation, between and during turns.
ConversationEvent = ApprovalDecidedFrame


def event_from_wire(data: dict[str, Any]) -> ConversationEvent:
    """Rebuild a conversation event from its wire form (events cross processes through Redis)."""
    return ApprovalDecidedFrame.model_validate(data)


def frame_from_wire(data: dict[str, Any]) -> AnyFrame:
    """Rebuild a frame from its wire form (frames cross process boundaries through Redis)."""
    kinds: dict[str, type[AnyFrame]] = {
        "meta": MetaFrame,
        "token": TokenFrame,
        "mcp_tool": McpToolFrame,
        "error": ErrorFrame,
        "approval_required": ApprovalRequiredFrame,
        "done": DoneFrame,
    }
    return kinds[data["type"]].model_validate(data)

"""The executor's own types: what a stream callback receives, why a run stops, what a run did.

These are the app's words for an agent run; the ADK runner (``apps/agents/adk/runner.py``)
translates ADK's events into them, so nothing above the executor sees a vendor type. Text deltas
reuse the provider protocol's ``TextDelta`` (one name per concept).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from apps.agents.llm.base import TextDelta


class ToolCallStart(BaseModel):
    type: Literal["tool_call_start"] = "tool_call_start"
    tool: str
    call_id: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolCallEnd(BaseModel):
    type: Literal["tool_call_end"] = "tool_call_end"
    tool: str
    call_id: str
    output: Any = None
    error: str | None = None


class RunError(BaseModel):
    """Why a run ended without an answer of its own (or was stopped): a message and a stable code."""

    type: Literal["run_error"] = "run_error"
    message: str
    code: str


class ApprovalPending(BaseModel):
    """A write tool call that waits for a member's decision: the run stops after this step.

    ``diff`` is the human-readable change (``summary``, ``changes``, ``before``, ``after``);
    ``can_decide`` says whether the user whose turn it is may decide it (editors and owners)."""

    type: Literal["approval_pending"] = "approval_pending"
    approval_id: str
    tool: str
    call_id: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    diff: dict[str, Any] = Field(default_factory=dict)
    expires_at: str
    can_decide: bool


class ToolResume(BaseModel):
    """Continue a run that stopped for an approval: the decided call's result is the new message."""

    call_id: str
    tool: str
    result: dict[str, Any]


class ToolCallRecord(BaseModel):
    """One tool call of a run, as the audit trail (``kb.agent_run_tool_calls``) stores it."""

    call_id: str
    tool: str
    input: dict[str, Any] = Field(default_factory=dict)
    output: Any = None
    error: str | None = None
    duration_ms: int = 0
    step: int = 0


class RunResumed(BaseModel):
    """A run taken over by another process (its own died): what its earlier attempts did, once,
    before the run goes on. ``text`` is the text of its finished model steps; ``tool_calls`` the
    calls whose result is stored (they are not run again)."""

    type: Literal["run_resumed"] = "run_resumed"
    text: str = ""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    attempt: int = 2


class ModelUsage(BaseModel):
    """The tokens one model call reported (its provider's ``Done``): a plain answer gives them to the
    chat layer, which records them with the answer (``services.agent_run_plain``)."""

    type: Literal["model_usage"] = "model_usage"
    input_tokens: int = 0
    output_tokens: int = 0


class TraceMessage(BaseModel):
    """One message of a run, as the audit trail (``kb.agent_run_messages``) stores it."""

    step_number: int
    role: str
    content: str = ""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)


RunEvent = TextDelta | ToolCallStart | ToolCallEnd | RunError | ApprovalPending | RunResumed
StreamCallback = Callable[[RunEvent], Awaitable[None] | None]


StopCode = Literal["cancelled", "timeout", "conversation_deleted", "turn_failed_repeatedly"]
# The stops that close a run as an error (with the code as its stop reason); the rest cancel it.
ERROR_STOPS = frozenset({"timeout", "turn_failed_repeatedly"})


@dataclass(frozen=True)
class StopReason:
    """Why a run was stopped from outside: a timeout, or its process dying too often
    (``turn_failed_repeatedly``), close the run as an error; the rest as cancelled."""

    code: StopCode
    message: str


CANCELLED = StopReason(code="cancelled", message="the run was cancelled")


class StopSignal:
    """The one object that stops a run: set by a user's cancel, a timeout or a deletion.

    ``event`` is what the runner watches (a frame bus may set it from another process, without
    a reason); ``stop`` sets it with a reason (the first reason wins). ``reason`` answers why,
    asking ``explain`` when the event was set without one, else ``CANCELLED``.
    """

    def __init__(
        self,
        event: asyncio.Event | None = None,
        *,
        explain: Callable[[], Awaitable[StopReason | None]] | None = None,
    ) -> None:
        self.event = event if event is not None else asyncio.Event()
        self._explain = explain
        self._reason: StopReason | None = None

    def stop(self, reason: StopReason = CANCELLED) -> None:
        if self._reason is None:
            self._reason = reason
        self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()

    async def reason(self) -> StopReason:
        if self._reason is None:
            explained = await self._explain() if self._explain is not None else None
            self._reason = explained or CANCELLED
        return self._reason

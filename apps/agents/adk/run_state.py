"""What one ADK run records as it goes (``RunState``): text, tool calls, usage, steps, and why it stopped.

``adk_run`` (``runner.py``) hands ADK's callbacks and events to it; the executor reads it to close
the run. A resumed run restores it from the run's stored events first.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from google.adk.agents.callback_context import CallbackContext
from google.adk.events.event import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext

from apps.agents.events import (
    ApprovalPending,
    RunEvent,
    RunResumed,
    StreamCallback,
    TextDelta,
    ToolCallEnd,
    ToolCallRecord,
    ToolCallStart,
)
from apps.agents.history import HistoryMessage
from apps.agents.llm.base import Usage

logger = logging.getLogger("apps.agents.adk.runner")

DOOM_LOOP_REPEATS = 3

# What stopped a run from inside: the step limit, a repeated call (a doom loop), or a write tool
# call that waits for a member's approval (the run ends after that step; a later run continues).
LimitReason = Literal["max_steps", "doom_loop", "approval_required"]
INSIDE_STOPS = {"max_steps", "doom_loop", "approval_required"}


@dataclass
class Failure:
    """Why a run failed: a message and a stable code (``llm_error``, ``agent_not_found``, …)."""

    message: str
    code: str


@dataclass
class RunState:
    """What one run has done so far; its methods are the ADK callbacks and the event handler.

    The text is collected from partial events or from the final event, never both.
    """

    callback: StreamCallback | None
    max_steps: int
    steps: int = 0
    text: list[str] = field(default_factory=list)
    partial_seen: bool = False
    usage: Usage = field(default_factory=Usage)
    stop_reason: LimitReason | None = None
    stop_message: str = ""
    error: Failure | None = None
    seen_calls: Counter[str] = field(default_factory=Counter)
    pending: dict[str, tuple[ToolCallRecord, float]] = field(default_factory=dict)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    messages: list[HistoryMessage] = field(default_factory=list)
    paused: ApprovalPending | None = None
    events_stored: int = 0

    async def restore(self, events: Sequence[Event], *, attempt: int) -> None:
        """Take up what earlier attempts of this run did (their stored events): the steps, the
        text of the model calls that finished, the tool calls that have a result; then tell the
        caller (``RunResumed``). A tool call with no stored result is run again by ADK."""
        calls: dict[str, ToolCallRecord] = {}
        steps_text: list[str] = []
        for event in events:
            if event.author == "user":
                continue
            if event.usage_metadata is not None:
                self.usage = Usage(
                    input_tokens=self.usage.input_tokens + (event.usage_metadata.prompt_token_count or 0),
                    output_tokens=self.usage.output_tokens
                    + (event.usage_metadata.candidates_token_count or 0),
                )
            function_calls = event.get_function_calls()
            responses = event.get_function_responses()
            parts = (event.content.parts if event.content else None) or []
            text = "".join(p.text for p in parts if p.text and not p.thought)
            if (text or function_calls) and not responses and not event.error_code:
                self.steps += 1
            if text and not responses:
                steps_text.append(text)
            for fc in function_calls:
                key = (fc.name or "") + json.dumps(dict(fc.args or {}), sort_keys=True, default=str)
                self.seen_calls[key] += 1
                calls[fc.id or f"call_{fc.name}"] = ToolCallRecord(
                    call_id=fc.id or f"call_{fc.name}",
                    tool=fc.name or "",
                    input=dict(fc.args or {}),
                    step=self.steps,
                )
            for fr in responses:
                record = calls.pop(fr.id or f"call_{fr.name}", None)
                if record is None:
                    continue
                record.output = fr.response
                if isinstance(fr.response, dict) and fr.response.get("error"):
                    record.error = str(fr.response["error"])
                self.tool_calls.append(record)
        self.text.extend(steps_text)
        await self.emit(
            RunResumed(text="".join(steps_text), tool_calls=list(self.tool_calls), attempt=attempt)
        )

    async def pause(self, pending: ApprovalPending) -> None:
        """A write call waits for approval: tell the caller, and call the model no more."""
        self.paused = pending
        if self.stop_reason is None:
            self.stop_reason = "approval_required"
            self.stop_message = "waiting for a member's approval of a graph change"
        await self.emit(pending)

    async def emit(self, event: RunEvent) -> None:
        if self.callback is None:
            return
        result = self.callback(event)
        if inspect.isawaitable(result):
            await result

    async def stream_text(self, text: str) -> None:
        """A text delta the model adapter streamed past ADK (``ModelAdapter.text_sink``): counts
        as a partial event's text, so the call's final response does not repeat it."""
        self.partial_seen = True
        self.text.append(text)
        await self.emit(TextDelta(text=text))

    # ADK callbacks --------------------------------------------------------------------------

    async def before_model(
        self, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        if self.stop_reason is None and self.steps >= self.max_steps:
            self.stop_reason = "max_steps"
            self.stop_message = f"stopped after {self.max_steps} steps (max_steps)"
        if self.stop_reason is not None:
            return LlmResponse(
                error_code=self.stop_reason, error_message=self.stop_message, turn_complete=True
            )
        self.steps += 1
        return None

    async def before_tool(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        call_id = tool_context.function_call_id or f"call_{tool.name}"
        record = ToolCallRecord(call_id=call_id, tool=tool.name, input=dict(args or {}), step=self.steps)
        self.pending[call_id] = (record, time.monotonic())
        await self.emit(ToolCallStart(tool=tool.name, call_id=call_id, input=record.input))
        key = tool.name + json.dumps(args or {}, sort_keys=True, default=str)
        self.seen_calls[key] += 1
        if self.seen_calls[key] >= DOOM_LOOP_REPEATS and self.stop_reason is None:
            self.stop_reason = "doom_loop"
            self.stop_message = f"stopped: {tool.name} was called {DOOM_LOOP_REPEATS} times with the same arguments (doom loop)"
            return {"error": self.stop_message}
        return None

    async def after_tool(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, tool_response: Any
    ) -> dict[str, Any] | None:
        await self._finish_tool(tool_context.function_call_id or f"call_{tool.name}", tool_response)
        return None

    async def on_tool_error(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, error: Exception
    ) -> dict[str, Any] | None:
        response = {"error": str(error) or type(error).__name__}
        # An unknown tool skips the after-tool callbacks, so the call is closed here.
        await self._finish_tool(tool_context.function_call_id or f"call_{tool.name}", response)
        return response

    async def _finish_tool(self, call_id: str, response: Any) -> None:
        pending = self.pending.pop(call_id, None)
        if pending is None:
            return
        record, started = pending
        record.duration_ms = int((time.monotonic() - started) * 1000)
        record.output = response
        if isinstance(response, dict) and response.get("error"):
            record.error = str(response["error"])
        self.tool_calls.append(record)
        await self.emit(ToolCallEnd(tool=record.tool, call_id=call_id, output=response, error=record.error))

    def close_pending(self) -> None:
        """Record the calls still running when the run ended as ``not completed``."""
        for record, started in self.pending.values():
            record.duration_ms = int((time.monotonic() - started) * 1000)
            record.error = record.error or "not completed"
            self.tool_calls.append(record)
        self.pending.clear()

    # runner events ----------------------------------------------------------------------------

    async def on_event(self, event: Event) -> None:
        if event.author == "user":
            return
        parts = (event.content.parts if event.content else None) or []
        text = "".join(p.text for p in parts if p.text and not p.thought)
        if event.partial:
            if text:
                self.partial_seen = True
                self.text.append(text)
                await self.emit(TextDelta(text=text))
            return
        if event.error_code:
            self.partial_seen = False
            if event.error_code not in INSIDE_STOPS and self.error is None:
                self.error = Failure(event.error_message or event.error_code, "llm_error")
            return
        if text and not event.get_function_responses():
            if not self.partial_seen:
                self.text.append(text)
                await self.emit(TextDelta(text=text))
        self.partial_seen = False
        if event.usage_metadata is not None:
            self.usage = Usage(
                input_tokens=self.usage.input_tokens + (event.usage_metadata.prompt_token_count or 0),
                output_tokens=self.usage.output_tokens + (event.usage_metadata.candidates_token_count or 0),
            )

"""The agent branch of a turn: the executor with a stream callback mapped to frames (Decisions 1–5)."""

from __future__ import annotations

import copy
import json
from typing import Any

from django.conf import settings

from apps.agents.defaults import CITATION_INSTRUCTIONS
from apps.agents.events import (
    ApprovalPending,
    RunError,
    RunEvent,
    RunResumed,
    TextDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResume,
)
from apps.agents.executor import AgentExecutor, ExecuteRequest, ExecuteResult
from apps.agents.history import HistoryMessage
from apps.agents.models import RunStatus
from apps.agents.plain import Provider
from apps.chat.models import Message, MessageRole
from apps.chat.streams.frames import ApprovalRequiredFrame, ErrorFrame, McpToolFrame, TokenFrame
from apps.chat.turns.citations import CitationFilter, is_passage, iter_entities
from apps.chat.turns.turn import Answer, Turn, emit, progress_text
from apps.core.inputs import storable

# Stop reasons whose partial answer is kept as the assistant message, with the stop reason.
KEEP_PARTIAL = {"max_steps", "doom_loop", "cancelled", "timeout"}


def _bounded(value: Any) -> Any:
    """Tool output as sent to the browser: very large results are cut (the audit keeps them whole)."""
    limit = settings.KGCHAT_FRAME_RESULT_MAX_CHARS
    text = json.dumps(value, default=str, ensure_ascii=False)
    if len(text) <= limit:
        return value
    return {"truncated": True, "preview": text[:limit]}


def _chat_rows(turn: Turn, messages: list[HistoryMessage], *, waiting: str | None = None) -> list[Message]:
    """The turn's tool calls and tool results as ``kb.chat_messages`` rows (for the next turn's context).

    A call without a result (the turn was stopped while a tool ran) is left out, so the history
    never hands a model a tool call that nothing answered. The call ``waiting`` for approval is
    kept without its placeholder result: the decision's turn stores its real result.
    """
    answered = {c.id for m in messages if m.role == "tool" for c in m.tool_calls}
    rows = []
    for m in messages:
        if m.role == "tool":
            calls = [c.model_dump(mode="json") for c in m.tool_calls if c.id != waiting]
            if calls:
                rows.append(
                    Message(
                        conversation=turn.conversation,
                        role=MessageRole.TOOL,
                        content=m.content,
                        tool_calls=calls,
                    )
                )
            continue
        calls = [c.model_dump(mode="json") for c in m.tool_calls if c.id in answered]
        if calls:
            # The text the model said before calling tools is part of the final answer's content.
            rows.append(
                Message(
                    conversation=turn.conversation, role=MessageRole.ASSISTANT, content="", tool_calls=calls
                )
            )
    return rows


class _AgentStream:
    """What one agent turn streams: its run's events as frames, its text through the citation
    filter, and the entities its tool results gave (which citations may name)."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.known = turn.known
        self.citations = CitationFilter(turn.known)
        self.parts: list[str] = []
        progress_text(turn, self.parts)
        self.waiting: list[ApprovalPending] = []
        self.used: dict[str, None] = {}  # ids of the entities tool results gave this turn, in order
        # A taken-over turn: how much of its text its clients were shown already (not sent again).
        self.skip = turn.shown_chars

    async def send_text(self, text: str) -> None:
        if text:
            self.parts.append(text)
            if self.skip:
                cut = min(self.skip, len(text))
                self.skip -= cut
                text = text[cut:]
            if text:
                await emit(self.turn, TokenFrame(token=text))

    def use(self, result: Any) -> None:
        self.known.add_result(result)
        self.used.update((e["id"], None) for e in iter_entities(result))

    async def on_event(self, event: RunEvent) -> None:
        """The executor's stream callback."""
        turn = self.turn
        if isinstance(event, ApprovalPending):
            self.waiting.append(event)
            await emit(
                turn,
                ApprovalRequiredFrame(
                    approvalId=event.approval_id,
                    tool=event.tool,
                    callId=event.call_id,
                    arguments=event.arguments,
                    diff=event.diff,
                    expiresAt=event.expires_at,
                    canDecide=event.can_decide,
                ),
            )
        elif isinstance(event, ToolCallEnd) and self.waiting and event.call_id == self.waiting[0].call_id:
            return  # not completed: the approval frame stands for it until the decision
        elif isinstance(event, TextDelta):
            await self.send_text(self.citations.feed(event.text))
        elif isinstance(event, ToolCallStart | ToolCallEnd) and event.call_id in turn.completed_calls:
            if isinstance(event, ToolCallEnd) and not event.error:
                self.use(event.output)
        elif isinstance(event, ToolCallStart):
            # The arguments as they are stored (a number that is not finite as its spelling).
            await emit(
                turn,
                McpToolFrame(
                    tool=event.tool, callId=event.call_id, status="started", input=storable(event.input)
                ),
            )
        elif isinstance(event, ToolCallEnd):
            await emit(turn, self._tool_end(event.tool, event.call_id, event.output, event.error))
        elif isinstance(event, RunResumed):
            # What the dead process's attempts did: their tool results still back citations, and
            # their finished steps' text is the answer's start (its clients have it: not resent).
            for record in event.tool_calls:
                if not record.error:
                    self.use(record.output)
            await self.send_text(self.citations.feed(event.text))
        elif isinstance(event, RunError):
            await self.send_text(self.citations.flush())
            await emit(turn, ErrorFrame(error=event.message, code=event.code))

    def _tool_end(self, tool: str, call_id: str, output: Any, error: str | None) -> McpToolFrame:
        if error:
            return McpToolFrame(tool=tool, callId=call_id, status="error", error=error)
        self.use(output)
        return McpToolFrame(tool=tool, callId=call_id, status="completed", result=_bounded(output))

    async def resumed(self, decided: ToolResume) -> None:
        """The decided call ends here: approved (its result, or why the graph refused it) or declined."""
        error = decided.result.get("error")
        await emit(
            self.turn,
            self._tool_end(decided.tool, decided.call_id, decided.result, str(error) if error else None),
        )


async def run_agent_turn(turn: Turn, provider: Provider | None) -> Answer | None:
    """Run the agent with a stream callback mapped to frames; return the answer to store, if any."""
    definition = turn.agent_definition
    assert definition is not None and turn.run_id is not None
    stream = _AgentStream(turn)
    if turn.resume is not None and turn.resume.call_id not in turn.completed_calls:
        await stream.resumed(turn.resume)
    turn.run_taken = True
    agent = copy.copy(definition)
    agent.system_prompt = "\n\n".join(p for p in (definition.system_prompt, CITATION_INSTRUCTIONS) if p)
    result = await AgentExecutor().execute(
        ExecuteRequest(
            agent_definition=agent,
            message=turn.user_message.content,
            project_id=turn.project.id,
            history=turn.history,
            conversation_id=turn.conversation.id,
            user_id=str(turn.conversation.user_id),
            stream_callback=stream.on_event,
            provider=provider,
            stop=turn.stop,
            run_id=turn.run_id,
            run=turn.run,
            graph_version=turn.graph_version,
            tools_available=turn.tools_available,
            writer_user_id=turn.conversation.user_id,
            resume=turn.resume,
            attempt=turn.attempt,
        )
    )
    await stream.send_text(stream.citations.flush())
    return _answer(turn, stream, result)


def _answer(turn: Turn, stream: _AgentStream, result: ExecuteResult) -> Answer | None:
    """The answer a finished run leaves to store (None: nothing, e.g. a failed or empty cancelled run)."""
    parts, citations = stream.parts, stream.citations
    if result.status != RunStatus.SUCCESS and result.stop_reason not in KEEP_PARTIAL:
        return None
    if result.status != RunStatus.SUCCESS and not parts and result.stop_reason in {"cancelled", "timeout"}:
        return None
    stream.used.update((c.id, None) for c in citations.citations if not is_passage(c))
    context: dict[str, Any] = {
        "agent_run_id": str(turn.run_id),
        "graph_version": turn.graph_version,
        "entity_ids": list(stream.used),
    }
    if result.approval is not None:
        return _paused_answer(turn, result.messages, "".join(parts), context, citations, result.approval)
    if result.status != RunStatus.SUCCESS:
        context["stop_reason"] = result.stop_reason
    return Answer(
        content="".join(parts),
        retrieval_context=context,
        citations=citations.citations,
        extra=_chat_rows(turn, result.messages),
    )


def _paused_answer(
    turn: Turn,
    messages: list[HistoryMessage],
    text: str,
    context: dict[str, Any],
    citations: CitationFilter,
    approval: ApprovalPending,
) -> Answer:
    """A turn that waits for approval: its rows end with the assistant row carrying the waiting
    call, which holds the text so far and is the turn's answer (no separate message, so the
    decided result can follow its call directly)."""
    rows = _chat_rows(turn, messages, waiting=approval.call_id)
    row = next(
        (r for r in reversed(rows) if any(c.get("id") == approval.call_id for c in r.tool_calls)), None
    )
    if row is None:  # the call was made by a sub-agent whose rows are not kept: store the call itself
        row = Message(conversation=turn.conversation, role=MessageRole.ASSISTANT, content="")
        row.tool_calls = [{"id": approval.call_id, "name": approval.tool, "input": approval.arguments}]
        rows.append(row)
    row.content = text
    row.retrieval_context = {
        **context,
        "stop_reason": "approval_required",
        "approval_id": approval.approval_id,
    }
    row.citations = [c.model_dump() for c in citations.citations]
    return Answer(
        content=text,
        retrieval_context=row.retrieval_context,
        citations=citations.citations,
        extra=rows,
        answer_row=row,
    )

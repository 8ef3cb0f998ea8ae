"""The agent branch of a turn: the executor with a stream callback mapped to frames (Decisions 1–5)."""

from __future__ import annotations

import copy
import json
from typing import Any

from django.conf import settings

from apps.agents.defaults import CITATION_INSTRUCTIONS
from apps.agents.events import ApprovalPending, RunError, RunEvent, TextDelta, ToolCallEnd, ToolCallStart
from apps.agents.executor import AgentExecutor, ExecuteRequest
from apps.agents.history import HistoryMessage
from apps.agents.llm.base import Provider
from apps.agents.models import RunStatus
from apps.chat.citations import CitationFilter, iter_entities
from apps.chat.frames import ApprovalRequiredFrame, ErrorFrame, McpToolFrame, TokenFrame
from apps.chat.models import Message, MessageRole
from apps.chat.turn import Answer, PartialTextSaver, Turn, emit

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


async def run_agent_turn(turn: Turn, provider: Provider | None) -> Answer | None:
    """Run the agent with a stream callback mapped to frames; return the answer to store, if any."""
    definition = turn.agent_definition
    assert definition is not None and turn.run_id is not None
    run_id = turn.run_id
    known = turn.known
    citations = CitationFilter(known)
    parts: list[str] = []
    saver = PartialTextSaver(turn)

    async def send_text(text: str) -> None:
        if text:
            parts.append(text)
            await emit(turn, TokenFrame(token=text))
            await saver.maybe_save(parts)

    waiting: list[ApprovalPending] = []
    used: dict[str, None] = {}  # ids of the entities tool results gave this turn, in order

    def use(result: Any) -> None:
        known.add_result(result)
        used.update((e["id"], None) for e in iter_entities(result))

    async def on_event(event: RunEvent) -> None:
        if isinstance(event, ApprovalPending):
            waiting.append(event)
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
        elif isinstance(event, ToolCallEnd) and waiting and event.call_id == waiting[0].call_id:
            return  # not completed: the approval frame stands for it until the decision
        elif isinstance(event, TextDelta):
            await send_text(citations.feed(event.text))
        elif isinstance(event, ToolCallStart):
            await emit(
                turn, McpToolFrame(tool=event.tool, callId=event.call_id, status="started", input=event.input)
            )
        elif isinstance(event, ToolCallEnd):
            if event.error:
                await emit(
                    turn,
                    McpToolFrame(tool=event.tool, callId=event.call_id, status="error", error=event.error),
                )
            else:
                use(event.output)
                await emit(
                    turn,
                    McpToolFrame(
                        tool=event.tool,
                        callId=event.call_id,
                        status="completed",
                        result=_bounded(event.output),
                    ),
                )
        elif isinstance(event, RunError):
            await send_text(citations.flush())
            await emit(turn, ErrorFrame(error=event.message, code=event.code))

    if turn.resume is not None:
        # The decided call ends here: approved (its result, or why the graph refused it) or declined.
        decided = turn.resume
        error = decided.result.get("error")
        if error:
            frame = McpToolFrame(tool=decided.tool, callId=decided.call_id, status="error", error=str(error))
        else:
            use(decided.result)
            frame = McpToolFrame(
                tool=decided.tool, callId=decided.call_id, status="completed", result=_bounded(decided.result)
            )
        await emit(turn, frame)
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
            stream_callback=on_event,
            provider=provider,
            stop=turn.stop,
            run_id=run_id,
            run=turn.run,
            graph_version=turn.graph_version,
            writer_user_id=turn.conversation.user_id,
            resume=turn.resume,
        )
    )
    await send_text(citations.flush())
    if result.status != RunStatus.SUCCESS and result.stop_reason not in KEEP_PARTIAL:
        return None
    if result.status != RunStatus.SUCCESS and not parts and result.stop_reason in {"cancelled", "timeout"}:
        return None
    used.update((c.id, None) for c in citations.citations)
    context: dict[str, Any] = {
        "agent_run_id": str(run_id),
        "graph_version": turn.graph_version,
        "entity_ids": list(used),
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

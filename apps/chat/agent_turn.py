"""The agent branch of a turn: the executor with a stream callback mapped to frames (Decisions 1–5)."""

from __future__ import annotations

import copy
import json
from typing import Any

from django.conf import settings

from apps.agents.defaults import CITATION_INSTRUCTIONS
from apps.agents.events import RunError, RunEvent, TextDelta, ToolCallEnd, ToolCallStart
from apps.agents.executor import AgentExecutor, ExecuteRequest
from apps.agents.history import HistoryMessage
from apps.agents.llm.base import Provider
from apps.agents.models import RunStatus
from apps.chat.citations import CitationFilter
from apps.chat.frames import ErrorFrame, McpToolFrame, TokenFrame
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


def _chat_rows(turn: Turn, messages: list[HistoryMessage]) -> list[Message]:
    """The turn's tool calls and tool results as ``kb.chat_messages`` rows (for the next turn's context).

    A call without a result (the turn was stopped while a tool ran) is left out, so the history
    never hands a model a tool call that nothing answered.
    """
    answered = {c.id for m in messages if m.role == "tool" for c in m.tool_calls}
    rows = []
    for m in messages:
        if m.role == "tool":
            calls = [c.model_dump(mode="json") for c in m.tool_calls]
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

    async def on_event(event: RunEvent) -> None:
        if isinstance(event, TextDelta):
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
                known.add_result(event.output)
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
        )
    )
    await send_text(citations.flush())
    if result.status != RunStatus.SUCCESS and result.stop_reason not in KEEP_PARTIAL:
        return None
    if result.status != RunStatus.SUCCESS and not parts and result.stop_reason in {"cancelled", "timeout"}:
        return None
    context: dict[str, Any] = {"agent_run_id": str(run_id)}
    if result.status != RunStatus.SUCCESS:
        context["stop_reason"] = result.stop_reason
    return Answer(
        content="".join(parts),
        retrieval_context=context,
        citations=citations.citations,
        extra=_chat_rows(turn, result.messages),
    )

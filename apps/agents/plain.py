"""Plain answers for the chat layer: a retrieval-augmented prompt and the conversation so far, answered
by the turn's model in one streamed call with no tools, as the same typed events an agent run gives
(``TextDelta``, then ``RunError`` if it failed or was stopped), and ``ModelUsage`` with the tokens the
call reported (the chat layer records them with the answer: ``services.agent_run_plain``).

With the executor, this is how the chat layer reaches a model: it never imports the providers
(``apps.agents.llm``) or ADK (``apps.agents.adk``) itself (import-linter's "models only through
agents" contract). ``Provider`` (the type of a model a caller injects, e.g. a test's scripted one)
and ``effective_model_name`` are named here for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from apps.agents.events import ModelUsage, RunError, RunEvent, StopSignal
from apps.agents.history import HistoryMessage, history_window
from apps.agents.llm.base import (
    ChatMessage,
    Done,
    ErrorEvent,
    GenerationConfig,
    LLMError,
    Provider,
    TextDelta,
    ToolCallRequest,
)
from apps.agents.llm.resolve import effective_model_name, resolve_model
from apps.agents.loop.turn import turn_steps
from apps.core.cancel import CANCELLED, until_cancelled

__all__ = ["Provider", "effective_model_name", "history_messages", "plain_answer"]

# A plain answer is steadier than an agent's step: the model only restates what retrieval found.
PLAIN_TEMPERATURE = 0.2


def history_messages(
    history: list[HistoryMessage], system_prompt: str, *, max_messages: int = 10, token_budget: int = 0
) -> list[ChatMessage]:
    """The model's messages: the system prompt, then the newest ``max_messages`` messages of the
    conversation within ``token_budget`` (chat-agent-loop CA-5/CA-6)."""
    out = [ChatMessage(role="system", content=system_prompt)]
    for m in history_window(history, limit=max_messages, token_budget=token_budget):
        if m.role == "user":
            out.append(ChatMessage(role="user", content=m.content))
        elif m.role == "tool":
            for call in m.tool_calls or []:
                out.append(ChatMessage(role="tool", content=m.content, tool_call_id=call.id, name=call.name))
            if not m.tool_calls:
                out.append(ChatMessage(role="tool", content=m.content))
        else:
            out.append(
                ChatMessage(
                    role="assistant",
                    content=m.content,
                    tool_calls=[
                        ToolCallRequest(id=c.id, name=c.name, arguments=c.input or {}) for c in m.tool_calls
                    ],
                )
            )
    return out


async def plain_answer(
    *,
    history: list[HistoryMessage],
    system_prompt: str,
    model: str,
    provider: Provider | None,
    stop: StopSignal,
    max_messages: int = 10,
) -> AsyncIterator[RunEvent | ModelUsage]:
    """Stream ``model``'s answer (``provider``, or the one the name resolves to) as ``TextDelta``s,
    and the tokens it reported as ``ModelUsage`` (none when it was stopped before it reported them).

    A model that fails ends the stream with ``RunError`` ``llm_error``; a ``stop`` (cancel, timeout,
    deletion) ends it at once with ``RunError`` carrying the stop's code and message.
    """
    messages = history_messages(history, system_prompt, max_messages=max_messages)
    try:
        # A small model answers as its agent turns' last step does (the loop's prompt and limits).
        llm = turn_steps(provider or resolve_model(model), project_id=None, graph_version=None)
        config = GenerationConfig(model=model, temperature=PLAIN_TEMPERATURE, stream=True)
        async for event in until_cancelled(llm.stream(messages, [], config), stop.event):
            if event is CANCELLED:
                reason = await stop.reason()
                message = "the turn was cancelled" if reason.code == "cancelled" else reason.message
                yield RunError(message=message, code=reason.code)
                return
            if isinstance(event, TextDelta):
                yield event
            elif isinstance(event, Done):
                yield ModelUsage(
                    input_tokens=event.usage.input_tokens, output_tokens=event.usage.output_tokens
                )
            elif isinstance(event, ErrorEvent):
                yield RunError(message=f"the model failed: {event.error}", code="llm_error")
                return
    except LLMError as exc:
        yield RunError(message=f"the model failed: {exc}", code="llm_error")

"""Conversation context strategies (chat-agent-loop CA-5/CA-6, agent-backed-chat Decision 5)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from apps.agents.history import HistoryMessage, HistoryToolCall, history_window
from apps.agents.llm.base import ChatMessage, ToolCallRequest
from apps.chat.models import Message

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
CONVERSATION_PROMPT = "conversation_system_prompt.md"


def load_prompt(name: str = CONVERSATION_PROMPT, prompts_dir: Path = PROMPTS_DIR) -> str:
    """Read a prompt template; a missing file raises ``FileNotFoundError``."""
    return (prompts_dir / name).read_text(encoding="utf-8")


def to_history(message: Message) -> HistoryMessage:
    """A stored chat message as the agents layer sees it."""
    return HistoryMessage(
        role=message.role,
        content=message.content,
        tool_calls=[HistoryToolCall.model_validate(c) for c in (message.tool_calls or [])],
    )


class ConversationContextStrategy(Protocol):
    def build_context(self, messages: list[HistoryMessage], system_prompt: str) -> list[ChatMessage]: ...


class FullHistoryContextStrategy:
    """System prompt first, then the newest ``max_messages`` messages within ``token_budget``."""

    def __init__(self, max_messages: int = 10, token_budget: int = 0) -> None:
        self.max_messages = max_messages
        self.token_budget = token_budget

    def build_context(self, messages: list[HistoryMessage], system_prompt: str) -> list[ChatMessage]:
        out = [ChatMessage(role="system", content=system_prompt)]
        for m in history_window(messages, limit=self.max_messages, token_budget=self.token_budget):
            if m.role == "user":
                out.append(ChatMessage(role="user", content=m.content))
            elif m.role == "tool":
                for call in m.tool_calls or []:
                    out.append(
                        ChatMessage(role="tool", content=m.content, tool_call_id=call.id, name=call.name)
                    )
                if not m.tool_calls:
                    out.append(ChatMessage(role="tool", content=m.content))
            else:
                out.append(
                    ChatMessage(
                        role="assistant",
                        content=m.content,
                        tool_calls=[
                            ToolCallRequest(id=c.id, name=c.name, arguments=c.input or {})
                            for c in m.tool_calls
                        ],
                    )
                )
        return out

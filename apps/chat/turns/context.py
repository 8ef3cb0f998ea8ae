"""A conversation as the model reads it: the plain chat's prompt template and stored messages as the
agents layer's history (which windows them: ``apps.agents.plain.history_messages``; CA-5/CA-6)."""

from __future__ import annotations

from pathlib import Path

from apps.agents.history import HistoryMessage, HistoryToolCall
from apps.chat.models import Message

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
CONVERSATION_PROMPT = "conversation_system_prompt.md"
# Appended when the search found passages of the project's documents.
PASSAGES_PROMPT = "conversation_passages_prompt.md"
DOCUMENTS_PROMPT = "conversation_documents_prompt.md"


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

"""A turn in progress: its state, its stop signal, and what both branches share (frames, partial text, the answer)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from apps.agents.events import StopReason, StopSignal, ToolResume
from apps.agents.history import HistoryMessage
from apps.agents.models import AgentDefinition, AgentRun
from apps.chat.models import Conversation, Message
from apps.chat.streams.bus import FrameBus, get_bus
from apps.chat.streams.frames import AnyFrame, Citation
from apps.chat.turns.citations import KnownEntities
from apps.core.inputs import storable
from apps.projects.models import Project


class ConversationDeleted(Exception):
    """The conversation was deleted while its turn ran: the turn stops and stores nothing."""


@dataclass
class Turn:
    """Everything a running turn needs; built by the turn service once the request is accepted."""

    turn_id: uuid.UUID
    conversation: Conversation
    project: Project
    user_message: Message
    agent_definition: AgentDefinition | None
    run_id: uuid.UUID | None
    model: str
    history: list[HistoryMessage] = field(default_factory=list)
    known: KnownEntities = field(default_factory=KnownEntities)
    seq: int = 0
    bus: FrameBus = field(default_factory=get_bus)
    # The one stop object of the turn (the bus's cancel event, the timeout, a deletion); the
    # turn service replaces it once the bus has opened the turn.
    stop: StopSignal = field(default_factory=StopSignal)
    # Where the text streamed so far is kept (agent turns: their run; plain turns: the claim),
    # so recovery can show it if the process dies; the turn service sets it.
    save_text: Callable[[str], Awaitable[object]] | None = None
    released: bool = False
    deleted: bool = False
    # A turn that continues after a decided approval: the decided call's result (no user message
    # of its own; ``user_message`` is the one the paused turn answered).
    resume: ToolResume | None = None
    # The project's graph version when the turn was admitted: what its answer is computed at.
    graph_version: int = 0
    # The run row opened with the turn's admission (agent turns), and whether the executor took it
    # over (it closes the run); one never taken over is closed by the turn service.
    run: AgentRun | None = None
    run_taken: bool = False
    # Which process's go at the turn this is: > 1 when this process took it over from one that
    # died (``recovery.turns_take_over``); its run then resumes from its stored events.
    attempt: int = 1
    # A taken-over turn: the text its clients were shown already (the redone model call's text
    # is sent only past it, so nothing is shown twice).
    shown: str = ""
    # ... and the tool calls whose chip it showed completed: a call run again (its result was not
    # stored before the process died; a write answers its first result) is not shown again.
    completed_calls: set[str] = field(default_factory=set)
    # The lease's renewal found the claim gone (released, deleted, or taken over by another process).
    lease_lost: bool = False

    @property
    def key(self) -> str:
        """The conversation id as the frame bus knows it."""
        return str(self.conversation.id)

    async def explain_stop(self) -> StopReason | None:
        """Why the turn was stopped without a reason: deleting a conversation cancels its turn."""
        if not self.deleted:
            self.deleted = not await Conversation.objects.filter(id=self.conversation.id).aexists()
        return CONVERSATION_DELETED if self.deleted else None


CONVERSATION_DELETED = StopReason(code="conversation_deleted", message="the conversation was deleted")


@dataclass
class Answer:
    """What a branch of the turn answers; the turn service stores it (``extra`` rows first)."""

    content: str
    retrieval_context: dict[str, Any]
    citations: list[Citation]
    extra: list[Message] = field(default_factory=list)
    # When set, this row of ``extra`` is the answer and no separate message is stored (a turn
    # that waits for approval: the row carrying the waiting call).
    answer_row: Message | None = None


@dataclass
class TurnHandle:
    """A started turn: subscribe to ``conversation_id`` on the bus to read its frames."""

    conversation_id: str
    turn_id: str
    user_message_id: str


class PartialTextSaver:
    """Save the text a turn has streamed now and then, so a crash does not lose what was shown.

    ``turn.save_text`` stores it; recovery turns it into the interrupted answer
    (``services.interrupted_turns_recover``).
    """

    def __init__(self, turn: Turn, every_seconds: float = 1.0) -> None:
        self.save = turn.save_text
        self.every = every_seconds
        self.last = time.monotonic()

    async def maybe_save(self, parts: list[str]) -> None:
        now = time.monotonic()
        if self.save is not None and now - self.last >= self.every:
            self.last = now
            await self.save(storable("".join(parts)))  # a model's NUL or lone surrogate, as U+FFFD


async def emit(turn: Turn, frame: AnyFrame) -> None:
    """Number ``frame`` and publish it (not once another process took the turn over)."""
    if turn.lease_lost:
        return
    turn.seq += 1
    frame.seq = turn.seq
    await turn.bus.publish(str(turn.conversation.id), frame)

"""A turn in progress: its state, its stop signal, and what both branches share (frames, partial text, the answer)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
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
from apps.chat.streams.frames import AnyFrame, Citation, McpToolFrame, TokenFrame
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
    # Where the text streamed so far and the frames' mark are kept (``TurnProgress``), so that a
    # process taking the turn over goes on from there; the turn service sets it.
    progress: TurnProgress | None = None
    released: bool = False
    deleted: bool = False
    # A turn that continues after a decided approval: the decided call's result (no user message
    # of its own; ``user_message`` is the one the paused turn answered).
    resume: ToolResume | None = None
    # The project's graph version when the turn was admitted: what its answer is computed at.
    graph_version: int = 0
    # What the graph tools' availability checks said when an agent turn was admitted (read in the
    # admission's statement), by tool name; None: not read (the run reads them).
    tools_available: dict[str, bool] | None = None
    # The run row opened with the turn's admission (agent turns), and whether the executor took it
    # over (it closes the run); one never taken over is closed by the turn service.
    run: AgentRun | None = None
    run_taken: bool = False
    # Which process's go at the turn this is: > 1 when this process took it over from one that
    # died (``recovery.turns_take_over``); its run then resumes from its stored events.
    attempt: int = 1
    # How many characters of text its ``token`` frames carried, over every attempt: a taken-over
    # turn sends the redone model call's text only past them, so nothing is shown twice.
    shown_chars: int = 0
    # ... and the tool calls whose chip it showed completed: a call run again (its result was not
    # stored before the process died; a write answers its first result) is not shown again.
    completed_calls: set[str] = field(default_factory=set)
    # A taken-over turn that ends rather than goes on (cancelled meanwhile, or its process died
    # too often): its stop, set before it runs (``recovery.Takeover.ending``).
    ending: StopReason | None = None
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
    """What a branch of the turn answers; the turn service stores it (``run``, then ``extra`` rows first)."""

    content: str
    retrieval_context: dict[str, Any]
    citations: list[Citation]
    extra: list[Message] = field(default_factory=list)
    # When set, this row of ``extra`` is the answer and no separate message is stored (a turn
    # that waits for approval: the row carrying the waiting call).
    answer_row: Message | None = None
    # A plain answer's record of its model call (``agents.services.agent_run_plain``: its tokens),
    # stored with the answer; an agent answer's run was opened with its turn.
    run: AgentRun | None = None


@dataclass
class TurnHandle:
    """A started turn: subscribe to ``conversation_id`` on the bus to read its frames."""

    conversation_id: str
    turn_id: str
    user_message_id: str


log = logging.getLogger("kgchat.chat")


# The mark of a turn just claimed (``claim.py``; a new conversation's with its row): its first
# frame, ``meta`` (seq 1), counted before it is published. It is the one frame a process taking
# the turn over never sends again, so its frames go on at seq 2 whether or not ``meta`` got out.
CLAIMED_MARK: dict[str, object] = {"seq": 1, "chars": 0, "calls": []}


class TurnProgress:
    """Where a turn is, saved as it goes, so that a process taking it over (its own died) goes on
    from there: the text it has streamed (a stopped turn keeps it as its answer) and its frames'
    mark (``mark``: the last ``seq`` published, the characters its ``token`` frames carried, the
    tool calls shown completed), through ``save(text, mark)``.

    Saved after the frames it counts were published, never before: a mark ahead of what a client
    saw would leave it a gap in ``seq``. Saves are a task of the turn's, one at a time, each taking
    the mark as it is when it starts: an agent turn's frames other than ``token`` are saved at once
    (the turn does not wait for it: its next step, the model's first request after ``meta``, goes
    on meanwhile); ``token`` frames at most once every ``every_seconds``, the last ones that long
    after them (so a turn whose text pauses, waiting on its model or a tool, has all of it saved).
    ``save`` gets the text as None when it is what the last save stored (a fresh turn's: empty)."""

    def __init__(
        self,
        turn: Turn,
        save: Callable[[str | None, dict[str, object]], Awaitable[object]],
        every_seconds: float = 1.0,
    ) -> None:
        self.turn = turn
        self.save_fn = save
        self.every = every_seconds
        self.last = time.monotonic()
        self.text: Callable[[], str] = lambda: ""
        # What the last save stored of the text; a turn taken over restores its own (unknown here).
        self.saved_text: str | None = "" if turn.attempt == 1 else None
        self.dirty = False
        self.urgent = asyncio.Event()  # a frame other than ``token``: save without waiting
        self.lock = asyncio.Lock()
        self.more = asyncio.Event()
        self.saver: asyncio.Task[None] | None = None
        self.closed = False

    def mark(self) -> dict[str, object]:
        turn = self.turn
        return {"seq": turn.seq, "chars": turn.shown_chars, "calls": sorted(turn.completed_calls)}

    async def published(self, frame: AnyFrame) -> None:
        """``frame`` was published: save now, or soon."""
        if self.closed or frame.type in ("done", "meta"):
            return  # ``meta``: counted by the claim (``CLAIMED_MARK``)
        self.dirty = True
        if frame.type != "token" and self.turn.run_id is not None:
            self.urgent.set()
        if self.saver is None:
            self.saver = asyncio.get_running_loop().create_task(self._save_soon())
        self.more.set()

    async def _save_soon(self) -> None:
        """The turn's saver: once woken, a save at once (``urgent``) or ``every_seconds`` after the last."""
        while not self.closed:
            await self.more.wait()
            self.more.clear()
            wait = self.every - (time.monotonic() - self.last)
            if wait > 0 and not self.urgent.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.urgent.wait(), wait)
            try:
                await self.save()
            except Exception:
                log.warning("turn %s: saving its progress failed", self.turn.turn_id, exc_info=True)

    async def save(self) -> None:
        async with self.lock:
            if not self.dirty or self.closed:
                return
            self.dirty = False
            self.urgent.clear()
            self.last = time.monotonic()
            text = storable(self.text())  # a model's NUL, as U+FFFD
            await self.save_fn(None if text == self.saved_text else text, self.mark())
            self.saved_text = text

    async def close(self) -> None:
        """The turn's branch is over: nothing more is saved (a save under way ends first)."""
        self.closed = True
        if self.saver is not None:
            self.saver.cancel()
            async with self.lock:  # a save under way ends before the turn's thread goes
                pass
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.saver


def progress_text(turn: Turn, parts: list[str]) -> None:
    """The turn's text so far is ``parts`` (what its progress saves)."""
    if turn.progress is not None:
        turn.progress.text = lambda: "".join(parts)


async def emit(turn: Turn, frame: AnyFrame) -> None:
    """Number ``frame``, publish it (not once another process took the turn over), and count it in
    the turn's progress."""
    if turn.lease_lost:
        return
    turn.seq += 1
    frame.seq = turn.seq
    await turn.bus.publish(str(turn.conversation.id), frame)
    if isinstance(frame, TokenFrame):
        turn.shown_chars += len(frame.token)
    elif isinstance(frame, McpToolFrame) and frame.status != "started":
        turn.completed_calls.add(frame.callId)
    if turn.progress is not None:
        await turn.progress.published(frame)

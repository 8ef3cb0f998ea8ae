"""The frame bus of one server process: each conversation's running turn as a list of frames in
memory, read by the sockets of this process (see ``apps.chat.streams.bus``). ``RedisFrameBus`` keeps one
too, for the turns its own process runs."""

from __future__ import annotations

import asyncio
import contextlib
from array import array
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from apps.chat.streams.frames import RETENTION_SECONDS, AnyFrame, ConversationEvent, frame_from_text
from apps.core.timeouts import call_later_bare


class _LocalWatch:
    def __init__(self, registry: dict[str, set[_LocalWatch]], conversation_id: str) -> None:
        self._registry = registry
        self._key = conversation_id
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[ConversationEvent] = asyncio.Queue()
        registry.setdefault(conversation_id, set()).add(self)

    def put(self, event: ConversationEvent) -> None:
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)

    def __aiter__(self) -> _LocalWatch:
        return self

    async def __anext__(self) -> ConversationEvent:
        return await self._queue.get()

    async def aclose(self) -> None:
        watchers = self._registry.get(self._key)
        if watchers is None:
            return
        watchers.discard(self)
        if not watchers:
            del self._registry[self._key]


def _wake_future(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


# How many of a running turn's latest frames its log keeps as objects; the ones before them are
# kept as their text (``_TurnLog.fold``).
LIVE_FRAMES = 32


@dataclass
class _TurnLog:
    """A turn's frames in publication order, read by position (``at``): the latest as frame
    objects, the ones before them as their JSON texts and ``seq``s.

    A frame object is three or four objects the garbage collector walks at every full collection.
    Kept as objects for ``RETENTION_SECONDS`` after their turn, they were most of what it walked
    (docs/benchmarks.md); kept while their turn runs (a 300-token answer holds 300),
    they were about a seventh of it at 3 turns/s (the same census). The subscribers
    following a turn read its frames as they come, among the ``LIVE_FRAMES`` latest; one that
    joins late or falls behind gets the older ones rebuilt from their text (``frame_from_text``),
    as from Redis."""

    turn_id: str
    # Every frame by position; None once folded (``seqs`` and ``texts`` then have it).
    frames: list[AnyFrame | None] = field(default_factory=list)
    # The folded frames' ``seq``s and JSON texts, positions 0 to ``len(texts) - 1``.
    seqs: array[int] = field(default_factory=lambda: array("q"))
    texts: list[str] = field(default_factory=list)
    finished: bool = False
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    # One future per subscriber waiting for the next frame (a plain future: an ``asyncio.Event``
    # per wait built a future of its own anyway, plus its waiter list).
    waiters: list[asyncio.Future[None]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.frames)

    def append(self, frame: AnyFrame) -> None:
        self.frames.append(frame)
        if len(self.frames) - len(self.texts) >= 2 * LIVE_FRAMES:
            self.fold(len(self.frames) - LIVE_FRAMES)

    def fold(self, end: int) -> None:
        """Keep the frames before position ``end`` as their text from now on. The texts are there
        before the objects go: a subscriber on another thread finds one or the other."""
        start = len(self.texts)
        for position in range(start, end):
            frame = self.frames[position]
            assert frame is not None
            self.seqs.append(frame.seq)
            self.texts.append(frame.text())
        for position in range(start, end):
            self.frames[position] = None

    def compact(self) -> None:
        """The turn is over: every frame kept as text, for the late subscribers."""
        self.fold(len(self.frames))

    def at(self, position: int) -> tuple[int, AnyFrame | str]:
        """The frame at ``position``: its ``seq`` and the frame, or its text once folded."""
        frame = self.frames[position]
        if frame is None:
            return self.seqs[position], self.texts[position]
        return frame.seq, frame

    def wake(self) -> None:
        if not self.waiters:
            return
        waiters, self.waiters = self.waiters, []
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for waiter in waiters:
            loop = waiter.get_loop()
            if loop is running:
                # The usual case (a turn and its subscribers share the loop): set it here.
                # call_soon_threadsafe would also write to the loop's self-pipe, a system call
                # per frame and subscriber that hands the GIL to the database threads.
                _wake_future(waiter)
            elif not loop.is_closed():
                loop.call_soon_threadsafe(_wake_future, waiter)


@dataclass(frozen=True)
class Resumed:
    """Where a taken-over turn's frames go on: after ``seq``; ``shown`` is its token frames' text."""

    seq: int = 0
    shown: str = ""
    # The tool calls whose chip was shown completed (or failed): not shown again.
    completed: frozenset[str] = frozenset()


class InProcessFrameBus:
    def __init__(self, retention_seconds: float = RETENTION_SECONDS) -> None:
        self._logs: dict[str, _TurnLog] = {}
        self._retention = retention_seconds
        self._watchers: dict[str, set[_LocalWatch]] = {}
        # Subscribers waiting for a turn to open here (``opened``), by conversation.
        self._opening: dict[str, list[asyncio.Future[None]]] = {}

    async def begin(self, conversation_id: str, turn_id: str) -> None:
        old = self._logs.get(conversation_id)
        if old is not None and not old.finished:
            old.finished = True
            old.wake()
        self._logs[conversation_id] = _TurnLog(turn_id=turn_id)
        for waiter in self._opening.pop(conversation_id, []):
            if not waiter.get_loop().is_closed():
                waiter.get_loop().call_soon_threadsafe(_wake_future, waiter)

    async def opened(self, conversation_id: str, turn_id: str, within: float) -> bool:
        """Wait, ``within`` seconds at most, until the turn ``turn_id`` is open here: one its
        process left (and that this one takes over) opens again when taken over. Whether it is."""
        deadline = asyncio.get_running_loop().time() + within
        while True:
            log = self._logs.get(conversation_id)
            if log is not None and log.turn_id == turn_id:
                return True
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return False
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._opening.setdefault(conversation_id, []).append(waiter)
            try:
                await asyncio.wait_for(waiter, left)
            except TimeoutError:
                pass
            finally:
                waiters = self._opening.get(conversation_id, [])
                with contextlib.suppress(ValueError):
                    waiters.remove(waiter)
                if not waiters:
                    self._opening.pop(conversation_id, None)

    async def resume(self, conversation_id: str, turn_id: str) -> Resumed:
        """A turn of a dead process: its frames died with it (one process keeps them in memory),
        so the taken-over turn's frames start a new log; what it was shown is not known here."""
        await self.begin(conversation_id, turn_id)
        return Resumed()

    async def publish(self, conversation_id: str, frame: AnyFrame) -> None:
        log = self._logs.get(conversation_id)
        if log is None or log.finished:
            return
        log.append(frame)
        if frame.type == "done":
            # ``done`` ends the turn: from now on a cancel answers "not running".
            await self.finish(conversation_id)
            return
        log.wake()

    async def abandon(self, conversation_id: str) -> None:
        await self.finish(conversation_id)

    async def finish(self, conversation_id: str) -> None:
        log = self._logs.get(conversation_id)
        if log is None or log.finished:
            return
        log.finished = True
        log.wake()
        log.compact()
        turn_id = log.turn_id

        def forget() -> None:
            current = self._logs.get(conversation_id)
            if current is not None and current.turn_id == turn_id:
                del self._logs[conversation_id]

        # In a context of its own: the finishing task's (the turn's) would stay alive with the
        # timer, and with it what the turn's context variables hold (its database thread).
        call_later_bare(self._retention, forget)

    def is_running(self, conversation_id: str) -> bool:
        log = self._logs.get(conversation_id)
        return log is not None and not log.finished

    async def subscribe(
        self, conversation_id: str, *, after_seq: int = 0, include_finished: bool = True
    ) -> AsyncIterator[AnyFrame]:
        log = self._logs.get(conversation_id)
        if log is None or (log.finished and not include_finished):
            return
        loop = asyncio.get_running_loop()
        position = 0
        while True:
            while position < len(log):
                seq, frame = log.at(position)
                position += 1
                if seq > after_seq:
                    yield frame_from_text(frame) if isinstance(frame, str) else frame
            if log.finished:
                return
            waiter: asyncio.Future[None] = loop.create_future()
            log.waiters.append(waiter)
            try:
                if position >= len(log) and not log.finished:  # (a publisher on another thread)
                    await waiter
            finally:
                if not waiter.done():  # cancelled while waiting: no longer a waiter
                    waiter.cancel()
                    with contextlib.suppress(ValueError):
                        log.waiters.remove(waiter)

    async def cancel(self, conversation_id: str) -> bool:
        log = self._logs.get(conversation_id)
        if log is None or log.finished:
            return False
        log.cancel.set()
        return True

    def cancel_signal(self, conversation_id: str) -> asyncio.Event:
        log = self._logs.get(conversation_id)
        if log is None:
            raise KeyError(conversation_id)
        return log.cancel

    async def announce(self, conversation_id: str, event: ConversationEvent) -> None:
        for watcher in list(self._watchers.get(conversation_id, ())):
            watcher.put(event)

    async def watch(self, conversation_id: str) -> _LocalWatch:
        return _LocalWatch(self._watchers, conversation_id)

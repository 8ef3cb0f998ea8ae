"""The frame bus: where a running turn publishes its frames and where sockets read them.

A turn runs as its own task, detached from the socket or HTTP request that started it. Its
frames are kept until the turn is over (and a little after), so a second tab or a reconnecting
client replays them from any ``seq`` and then follows live. ``cancel`` reaches the running turn.

Besides turns, a conversation has watchers: every socket showing it. ``announce`` tells them
all of an event that is not part of a turn (an approval decided or found expired), whether or
not a turn runs; ``watch`` is registered when it returns, so nothing announced after is missed.

``InProcessFrameBus`` serves one server process. Several processes share turns through
``RedisFrameBus`` (see ``apps.chat.streams.redis_bus``), chosen when ``REDIS_URL`` is set.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Protocol, TypeVar

from apps.chat.streams.frames import AnyFrame, ConversationEvent
from apps.chat.streams.local_bus import InProcessFrameBus, Resumed

__all__ = ["FrameBus", "InProcessFrameBus", "Resumed", "Watch", "get_bus", "set_bus"]

T = TypeVar("T")


class FrameBus(Protocol):
    async def begin(self, conversation_id: str, turn_id: str) -> None:
        """Open a new turn of ``conversation_id`` (dropping a finished one's frames)."""

    async def resume(self, conversation_id: str, turn_id: str) -> Resumed:
        """Open, in this process, the running turn a dead process left (its frames are kept):
        the last ``seq`` it published and the text of its ``token`` frames, to go on from."""

    async def opened(self, conversation_id: str, turn_id: str, within: float) -> bool:
        """Wait (``within`` seconds at most) until the turn ``turn_id``, which holds the
        conversation's claim, can be followed here; whether it can. With one process, a turn whose
        process died is followed once this process has taken it over; with Redis, at once."""

    async def publish(self, conversation_id: str, frame: AnyFrame) -> None:
        """Append ``frame`` to the running turn and wake its subscribers."""

    async def abandon(self, conversation_id: str) -> None:
        """Stop publishing the turn from this process without ending it (another process took it
        over): this process's sockets no longer read it here."""

    async def finish(self, conversation_id: str) -> None:
        """Mark the running turn over; subscribers drain and stop."""

    def subscribe(
        self, conversation_id: str, *, after_seq: int = 0, include_finished: bool = True
    ) -> AsyncIterator[AnyFrame]:
        """Yield the turn's frames with ``seq > after_seq``, then follow until it is over."""

    async def cancel(self, conversation_id: str) -> bool:
        """Ask the running turn to stop; False when none is running."""

    def cancel_signal(self, conversation_id: str) -> asyncio.Event:
        """The event the running turn (in this process) watches for cancellation."""

    async def announce(self, conversation_id: str, event: ConversationEvent) -> None:
        """Tell every watcher of ``conversation_id`` (in every process) about ``event``."""

    async def watch(self, conversation_id: str) -> Watch:
        """Start watching ``conversation_id``: the events announced from now on, until closed."""


class Watch(Protocol):
    def __aiter__(self) -> AsyncIterator[ConversationEvent]: ...

    async def __anext__(self) -> ConversationEvent: ...

    async def aclose(self) -> None:
        """Stop watching (always call it: the watch is registered until then)."""


_bus: FrameBus | None = None


def get_bus() -> FrameBus:
    """Return the process's frame bus (Redis-backed when ``REDIS_URL`` is set)."""
    global _bus
    if _bus is None:
        from django.conf import settings

        if getattr(settings, "REDIS_URL", ""):
            from apps.chat.streams.redis_bus import RedisFrameBus

            _bus = RedisFrameBus(settings.REDIS_URL)
        else:
            _bus = InProcessFrameBus()
    return _bus


def set_bus(bus: FrameBus | None) -> None:
    """Replace the process's bus (tests)."""
    global _bus
    _bus = bus

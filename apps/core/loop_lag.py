"""How far behind its event loop runs: the delay a callback made ready now waits before it runs.

A server process runs every socket and every turn on one loop. When it has more to do than it
can (hundreds of streaming turns, a burst of admissions, database threads holding the GIL), each
pass of the loop gets longer and everything waits for it. Code that can do its work in fewer,
larger steps when the loop is behind reads ``loop_lag()``: the model's text is then merged into
fewer frames (``apps.agents.adk.model_adapter.coalesce_text``).

The probe is a timer that re-arms itself every ``PERIOD`` while someone holds it
(``LoopLag.hold``) and notes how late it fired. The value rises at once with a late timer and
falls back gradually (by a fifth of the difference a tick), so one quick pass does not end merging
in the middle of a backlog.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

PERIOD = 0.01
DECAY = 0.2


class LoopLag:
    """The lag of one event loop, measured while at least one holder needs it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, period: float = PERIOD) -> None:
        self.loop = loop
        self.period = period
        self.value = 0.0
        self._holders = 0
        self._timer: asyncio.TimerHandle | None = None

    @contextmanager
    def hold(self) -> Iterator[LoopLag]:
        """Measure while inside (the timer stops when the last holder leaves)."""
        self._holders += 1
        if self._timer is None:
            self._arm()
        try:
            yield self
        finally:
            self._holders -= 1
            if self._holders == 0 and self._timer is not None:
                self._timer.cancel()
                self._timer = None
                self.value = 0.0

    def _arm(self) -> None:
        due = self.loop.time() + self.period
        self._timer = self.loop.call_at(due, self._tick, due)

    def _tick(self, due: float) -> None:
        late = max(0.0, self.loop.time() - due)
        self.value = late if late >= self.value else self.value + (late - self.value) * DECAY
        if self._holders:
            self._arm()
        else:
            self._timer = None


_probes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLag] = weakref.WeakKeyDictionary()


def loop_lag(loop: asyncio.AbstractEventLoop | None = None) -> LoopLag:
    """The probe of ``loop`` (the running one by default), made on first use."""
    loop = loop or asyncio.get_running_loop()
    probe = _probes.get(loop)
    if probe is None:
        probe = _probes[loop] = LoopLag(loop)
    return probe

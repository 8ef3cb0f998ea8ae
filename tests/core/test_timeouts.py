"""Timers of a turn keep nothing of it alive: a cancelled ``call_later`` keeps the context it was
scheduled in until its due time, and with it what the turn's context variables hold."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from apps.core.timeouts import call_later_bare, wait_within

held: contextvars.ContextVar[object] = contextvars.ContextVar("held")


class Turnish:
    """Stands for what a turn's context variables hold (ADK's invocation context, the agent)."""


def timers_holding(loop: asyncio.AbstractEventLoop, value: object) -> int:
    """Timers still on the loop (cancelled ones stay until their due time) whose context holds
    ``value`` (``_scheduled`` and ``_context``: CPython's asyncio)."""
    scheduled = getattr(loop, "_scheduled", [])
    return sum(1 for handle in scheduled if handle._context.get(held) is value)


async def test_a_bounded_wait_answers_its_result_and_leaves_no_timer_holding_the_callers_context():
    turn = Turnish()
    held.set(turn)

    async def work() -> str:
        return "result" if held.get() is turn else "other context"

    result = await wait_within(work(), 30)

    assert result == "result"
    assert timers_holding(asyncio.get_running_loop(), turn) == 0
    # asyncio.wait_for's cancelled timer would hold it for its 30 s:
    await asyncio.wait_for(work(), 30)
    assert timers_holding(asyncio.get_running_loop(), turn) == 1


async def test_a_bounded_wait_that_runs_out_raises_timeout_and_cancels_its_work():
    cancelled = asyncio.Event()

    async def hang() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        await wait_within(hang(), 0.05)
    assert cancelled.is_set()


async def test_cancelling_the_caller_of_a_bounded_wait_cancels_the_work_and_is_not_a_timeout():
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hang() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    caller = asyncio.create_task(wait_within(hang(), 30))
    await started.wait()
    caller.cancel()

    with pytest.raises(asyncio.CancelledError):
        await caller
    assert cancelled.is_set()


async def test_a_bare_timer_fires_without_the_context_it_was_scheduled_in():
    seen: list[object] = []
    held.set(Turnish())
    fired = asyncio.Event()

    def callback() -> None:
        seen.append(held.get(None))
        fired.set()

    call_later_bare(0.01, callback)
    await asyncio.wait_for(fired.wait(), 5)

    assert seen == [None]

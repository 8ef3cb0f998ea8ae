"""Timers that keep no context alive.

``loop.call_later`` runs its callback in a copy of the context current when it was scheduled, and
a cancelled timer keeps that copy until its due time: cancelling clears the callback, not the
context. A timer scheduled inside a turn (a tool's 30 s timeout, the turn's 300 s watchdog) kept
what the turn's context variables hold (ADK's invocation context: the agent, its tools, the
session's events) alive that long after the turn, and every full collection walked it
(docs/benchmarks.md). These timers run in an empty context of their own.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def call_later_bare(delay: float, callback: Callable[..., Any], *args: Any) -> asyncio.TimerHandle:
    """``loop.call_later`` in an empty context: for callbacks that read no context variable."""
    return asyncio.get_running_loop().call_later(delay, callback, *args, context=contextvars.Context())


async def wait_within(awaitable: Awaitable[T], seconds: float) -> T:
    """``asyncio.wait_for(awaitable, seconds)`` whose timer keeps no context: the awaitable runs
    as a task in the current context (it may read the caller's context variables), is cancelled
    after ``seconds``, and ``TimeoutError`` is raised; a cancel of the caller cancels it too."""
    task = asyncio.ensure_future(awaitable)
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    timer = call_later_bare(seconds, expire)
    try:
        return await task
    except asyncio.CancelledError:
        if expired and task.cancelled():
            raise TimeoutError from None
        raise
    finally:
        timer.cancel()

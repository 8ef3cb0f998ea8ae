"""Stopping a stream at once: iterate it until an event is set, racing each wait for the next item
against the event (a slow model is stopped without waiting for its next token)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, TypeVar

T = TypeVar("T")


class _Cancelled:
    def __repr__(self) -> str:
        return "CANCELLED"


CANCELLED: Any = _Cancelled()


async def until_cancelled(stream: AsyncIterator[T], cancel: asyncio.Event) -> AsyncIterator[T]:
    """Iterate ``stream`` until ``cancel`` is set; then yield ``CANCELLED`` once and close the stream.

    The wait for the next item races the cancel signal, so a slow model is stopped at once.
    """
    iterator = aiter(stream)
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        while True:
            step = asyncio.ensure_future(anext(iterator))
            await asyncio.wait({step, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if step.done():
                try:
                    item = step.result()
                except StopAsyncIteration:
                    return
                yield item
                if cancel.is_set():
                    yield CANCELLED
                    return
                continue
            step.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
                await step
            yield CANCELLED
            return
    finally:
        waiter.cancel()
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()

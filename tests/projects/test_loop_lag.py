"""The event loop's lag probe: a blocked loop shows as lag, falling back once it catches up; the
probe runs only while held."""

import asyncio
import time

from apps.core.loop_lag import LoopLag, loop_lag


async def first_reading(probe: LoopLag) -> float:
    """The probe's value once its timer has fired after the block (a few passes of the loop)."""
    for _ in range(100):
        await asyncio.sleep(0)
        if probe.value:
            break
    return probe.value


async def test_a_blocked_loop_shows_as_lag_and_the_probe_stops_when_released() -> None:
    probe = loop_lag()

    with probe.hold():
        time.sleep(0.2)  # noqa: ASYNC251 - the loop runs nothing else: its timer fires ~0.2 s late
        behind = await first_reading(probe)

    assert behind >= 0.15
    assert probe._timer is None and probe.value == 0.0


async def test_the_lag_falls_back_gradually_once_the_loop_catches_up() -> None:
    probe = loop_lag()

    with probe.hold():
        time.sleep(0.2)  # noqa: ASYNC251 - blocking the loop is the point
        peak = await first_reading(probe)
        await asyncio.sleep(0.3)
        later = probe.value

    assert 0 < later < peak

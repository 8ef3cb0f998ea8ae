"""A turn's progress (``TurnProgress``): what it saves, when, and what the turn waits for.

The mark a process taking the turn over goes on from is saved after the frames it counts were
published; a frame other than ``token`` is saved at once, but the turn goes on meanwhile (its next
step, the model's first request after ``meta``, does not wait on a database write). ``meta`` is
counted by the claim itself (``CLAIMED_MARK``), and the text is written only when it changed.
"""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from apps.chat.streams.frames import McpToolFrame, MetaFrame, TokenFrame
from apps.chat.turns.turn import TurnProgress


def _turn() -> SimpleNamespace:
    return SimpleNamespace(
        turn_id=uuid.uuid4(), run_id=uuid.uuid4(), attempt=1, seq=0, shown_chars=0, completed_calls=set()
    )


def _meta() -> MetaFrame:
    return MetaFrame(conversationId="c", messageId="m", agentDefinitionId="a", runId="r", model="m")


class Saves:
    """The saves a progress asked for; each waits until the test lets it finish."""

    def __init__(self) -> None:
        self.asked: list[tuple[str | None, dict]] = []
        self.finish = asyncio.Event()
        self.started = asyncio.Event()

    async def __call__(self, text: str | None, mark: dict) -> None:
        self.asked.append((text, mark))
        self.started.set()
        await self.finish.wait()


async def _publish(progress: TurnProgress, turn: SimpleNamespace, frame, text: list[str]) -> None:
    turn.seq += 1
    frame.seq = turn.seq
    if isinstance(frame, TokenFrame):
        turn.shown_chars += len(frame.token)
        text.append(frame.token)
    await progress.published(frame)


async def test_a_tool_frame_is_saved_at_once_while_the_turn_goes_on():
    turn, saves, text = _turn(), Saves(), []
    progress = TurnProgress(turn, saves, every_seconds=60)  # type: ignore[arg-type]
    progress.text = lambda: "".join(text)

    try:
        await asyncio.wait_for(_publish(progress, turn, _meta(), text), 5)
        # published() comes back although the save has not finished (it waits on ``finish``).
        tool = McpToolFrame(tool="search", callId="c1", status="started")
        await asyncio.wait_for(_publish(progress, turn, tool, text), 5)
        await asyncio.wait_for(saves.started.wait(), 5)

        assert saves.asked == [(None, {"seq": 2, "chars": 0, "calls": []})]
    finally:
        saves.finish.set()
        await progress.close()


async def test_meta_alone_is_never_saved_the_claim_counted_it():
    turn, saves, text = _turn(), Saves(), []
    saves.finish.set()
    progress = TurnProgress(turn, saves, every_seconds=0.01)  # type: ignore[arg-type]

    await _publish(progress, turn, _meta(), text)
    await asyncio.sleep(0.1)

    assert saves.asked == []
    await progress.close()


async def test_the_text_is_written_only_when_it_changed_since_the_last_save():
    turn, saves, text = _turn(), Saves(), []
    saves.finish.set()
    progress = TurnProgress(turn, saves, every_seconds=60)  # type: ignore[arg-type]
    progress.text = lambda: "".join(text)

    async def saved(count: int) -> None:
        for _ in range(500):
            if len(saves.asked) >= count:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{count} saves expected, got {saves.asked}")

    await _publish(progress, turn, McpToolFrame(tool="search", callId="c1", status="started"), text)
    await saved(1)
    await _publish(progress, turn, TokenFrame(token="Paris "), text)
    await _publish(progress, turn, McpToolFrame(tool="search", callId="c1", status="completed"), text)
    await saved(2)
    await _publish(progress, turn, McpToolFrame(tool="search", callId="c2", status="started"), text)
    await saved(3)

    assert [asked[0] for asked in saves.asked] == [None, "Paris ", None]
    assert saves.asked[-1][1]["seq"] == 4
    await progress.close()


async def test_a_turn_taken_over_writes_its_text_at_its_first_save():
    """Even when empty: what the run row holds then is the dead process's, not known here."""
    turn, saves, text = _turn(), Saves(), []
    turn.attempt = 2
    saves.finish.set()
    progress = TurnProgress(turn, saves, every_seconds=60)  # type: ignore[arg-type]
    progress.text = lambda: "".join(text)

    await _publish(progress, turn, McpToolFrame(tool="search", callId="c1", status="started"), text)
    for _ in range(500):
        if saves.asked:
            break
        await asyncio.sleep(0.01)

    assert saves.asked[0][0] == ""  # not None ("as last saved"), which a fresh turn would send
    await progress.close()

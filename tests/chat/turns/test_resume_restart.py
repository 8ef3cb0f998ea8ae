"""Issue #27 with one process and no Redis (the ``make run`` topology): the only daphne is killed
with SIGKILL in the middle of an agent turn and started again on the same database. Its frames
died with it; the turn's saved mark (the last ``seq``, the text's length, the chips shown completed)
is where the restarted process goes on from, as it starts: a websocket client that saw the frames
up to some ``seq`` reconnects with that ``afterSeq`` and gets the rest of the turn in one ``seq``
order, the text continuing without a repeat, no chip twice, to the stored answer.

The model is the one of ``test_resume_kill`` (a ``create_entity`` call, then the answer); the test
kills the process at a boundary it can see: the model holding its answer after a few words (its
mark saved once the text paused), or holding the next model call after the tool's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from apps.agents.models import AgentRun, RunStatus
from apps.chat.models import Conversation, Message
from apps.graph_tools.models import GraphChange, GraphObject
from bench.support import ServerProcess, start_daphne, wait_ready
from tests.chat.conftest import adb, session_cookie
from tests.chat.streams.test_multiprocess import WAIT, _wait_ready, one_process_env
from tests.chat.turns.test_resume_kill import (
    ANSWER,
    ANSWER_WORDS,
    LEASE_SECONDS,
    _check_the_turn_finished_on_b,
    _follow_on,
    _kill,
    _model_server,  # noqa: F401 - the module's model server, answering with each test's script
    _other_connection,
    _start_turn,
    _until,
    model,  # noqa: F401 - the fixtures of the same model
    script,  # noqa: F401
    writer,  # noqa: F401
)
from tests.factories import make_token

pytestmark = pytest.mark.django_db(transaction=True)


class OneProcess:
    """The one daphne of a ``make run`` (no ``REDIS_URL``), started again after it was killed."""

    def __init__(self, env: dict[str, str], logdir: str) -> None:
        self.env, self.logdir = env, logdir
        self.started: list[ServerProcess] = []

    def start(self, *, ready_by_request: bool = True) -> ServerProcess:
        """Start it (the next incarnation); ready when it answers a page, or (``ready_by_request``
        false) when it listens, so that no request of the test starts anything in it."""
        name = f"run{len(self.started) + 1}"
        server = start_daphne(name, env=self.env, log=Path(self.logdir) / f"{name}.log")
        self.started.append(server)
        if ready_by_request:
            _wait_ready(server)
        else:
            wait_ready(server, timeout=90)
        return server


@pytest.fixture
def one_process(django_db_blocker, model) -> Iterator[OneProcess]:  # noqa: F811
    with django_db_blocker.unblock():
        env = one_process_env(model.base_url, LEASE_SECONDS)
    with tempfile.TemporaryDirectory() as logdir:
        processes = OneProcess(env, logdir)
        try:
            yield processes
        finally:
            for server in processes.started:
                server.stop(15)
            for server in processes.started:
                print(f"--- daphne {server.name} ---", file=sys.__stderr__)
                print(server.log.read_text(errors="replace")[-4000:], file=sys.__stderr__)


async def _saved_mark(conversation_id: str) -> dict:
    conversation = await Conversation.objects.aget(id=conversation_id)
    return conversation.active_turn_shown


async def _until_saved(conversation_id: str, seq: int) -> None:
    """Wait until the turn's mark counts the frames up to ``seq`` (what a client saw)."""

    async def saved() -> bool:
        return (await _saved_mark(conversation_id)).get("seq") == seq

    await _until(saved, f"the turn's mark saved at seq {seq}")


async def _checked(before: list[dict], after: list[dict], again: ServerProcess, world) -> AgentRun:
    """``test_resume_kill``'s checks of a finished turn, showing its frames when one fails."""
    try:
        return await _check_the_turn_finished_on_b(before, after, again, world["project"])
    except AssertionError:
        print(f"frames before the kill: {before}\nafter: {after}", file=sys.__stderr__)
        raise


async def _streamed_words_then_killed(server: ServerProcess, world, writer, script, count: int):  # noqa: F811
    """Start the turn on ``server``; once ``count`` words of the answer streamed and the model holds
    the rest (its mark saved), kill ``server``. The frames the client saw."""
    token = await adb(make_token)(world["user"])
    script.hold_answer, script.hold_after = True, count + 1  # the stream's first chunk has no text
    http, response, frames = await _start_turn(server, world, writer, token)
    try:
        before = [await anext(frames) for _ in range(3)]  # meta, the write started, completed
        while "".join(f["token"] for f in before if f["type"] == "token") != "".join(ANSWER_WORDS[:count]):
            before.append(await anext(frames))
        await _until_saved(before[0]["conversationId"], before[-1]["seq"])
        _kill(server)
        await response.aclose()
    finally:
        script.release.set()
        await http.aclose()
    return before


async def test_the_restarted_process_goes_on_with_the_answer_after_the_seq_its_client_saw(
    one_process,
    world,
    writer,  # noqa: F811
    script,  # noqa: F811
    model,  # noqa: F811
):
    first = one_process.start()
    before = await _streamed_words_then_killed(first, world, writer, script, 5)

    again = one_process.start()
    after = await _follow_on(
        again, await adb(session_cookie)(world["user"]), before[0]["conversationId"], before[-1]["seq"]
    )

    # One seq order, the text going on where it stopped, the write's chip once, the same answer.
    run = await _checked(before, after, again, world)
    assert [f["type"] for f in after if f["type"] != "token"] == ["done"]
    assert "".join(f["token"] for f in after if f["type"] == "token") == "".join(ANSWER_WORDS[5:])
    assert len(model.requests) == 3  # the tool call once; the answer asked of each process
    assert run.final_text == ANSWER


async def test_killed_after_the_tool_result_the_restarted_process_asks_the_model_and_streams_on(
    one_process,
    world,
    writer,  # noqa: F811
    script,  # noqa: F811
    model,  # noqa: F811
):
    first = one_process.start()
    token = await adb(make_token)(world["user"])
    script.hold_answer = True  # the answer's model call never answers the first process
    http, response, frames = await _start_turn(first, world, writer, token)
    try:
        before = [await anext(frames) for _ in range(3)]  # meta, the write started, completed
        assert await asyncio.to_thread(script.held.wait, WAIT)
        await _until_saved(before[0]["conversationId"], before[-1]["seq"])
        _kill(first)
        await response.aclose()
    finally:
        script.release.set()
        await http.aclose()

    again = one_process.start()
    after = await _follow_on(
        again, await adb(session_cookie)(world["user"]), before[0]["conversationId"], before[-1]["seq"]
    )

    await _checked(before, after, again, world)
    assert after[0]["seq"] == before[-1]["seq"] + 1 and after[0]["type"] == "token"


async def test_a_restarted_process_finishes_the_turn_as_it_starts_with_no_client_coming_back(
    one_process,
    world,
    writer,  # noqa: F811
    script,  # noqa: F811
):
    first = one_process.start()
    before = await _streamed_words_then_killed(first, world, writer, script, 3)
    run_id = before[0]["runId"]

    started = time.monotonic()
    again = one_process.start(ready_by_request=False)  # nothing asks it anything

    async def finished() -> bool:
        # The answer stored (what a user coming back sees), not only the run's status: the run is
        # marked a success in its own transaction, a moment before the turn stores its messages.
        stored = Message.objects.filter(
            conversation_id=before[0]["conversationId"], role="assistant", content=ANSWER
        )
        return (
            await AgentRun.objects.filter(id=run_id, status=RunStatus.SUCCESS).aexists()
            and await stored.aexists()
        )

    await _until(finished, "the restarted process finished the turn")
    print(f"restart -> turn finished: {time.monotonic() - started:.2f} s", file=sys.__stderr__)

    run = await AgentRun.objects.aget(id=run_id)
    assert (run.attempts, run.worker) == (2, again.worker)
    answers = [
        m.content
        async for m in Message.objects.filter(
            conversation_id=before[0]["conversationId"], role="assistant"
        ).order_by("created_at")
    ]
    assert answers == ["", ANSWER]  # the write's call (its row), then the answer, stored once
    assert "WSCONNECT" not in again.output() and '"GET ' not in again.output()


async def test_killed_between_the_approve_and_its_continuation_the_restarted_process_continues_it(
    one_process,
    world,
    writer,  # noqa: F811
    model,  # noqa: F811
):
    """The user approves; the process commits the decision (the write done) and dies before the
    turn that continues it holds the conversation (the test holds the conversation's row, so that
    its claim waits, then kills the process there)."""
    writer.tool_policy = {"create_entity": {"approval": "always"}}
    await writer.asave()
    first = one_process.start()
    token = await adb(make_token)(world["user"])
    http, response, frames = await _start_turn(first, world, writer, token)
    paused = [frame async for frame in frames]
    await response.aclose()
    card = next(f for f in paused if f["type"] == "approval_required")
    conversation_id = paused[0]["conversationId"]
    row = await asyncio.to_thread(_other_connection)
    try:
        row.execute("SELECT 1 FROM kb.chat_conversations WHERE id = %s FOR UPDATE", [conversation_id])
        decision = asyncio.create_task(
            http.post(
                f"{first.http}/api/approvals/{card['approvalId']}/decision",
                json={"decision": "approve"},
                headers={"Authorization": f"Bearer {token}"},
            )
        )

        async def claiming() -> bool:
            return await asyncio.to_thread(_waits_on_the_conversation)

        await _until(claiming, "the decision committed and its continuation waits to claim")
        _kill(first)
        with contextlib.suppress(httpx.HTTPError):
            await decision
    finally:
        row.rollback()
        row.close()
        await http.aclose()
    assert await GraphChange.objects.filter(project=world["project"], action="create_entity").acount() == 1

    again = one_process.start()

    async def answered() -> bool:
        return await Message.objects.filter(conversation_id=conversation_id, content=ANSWER).aexists()

    await _until(answered, "the restarted process continued the decided approval")
    assert await GraphChange.objects.filter(project=world["project"], action="create_entity").acount() == 1
    assert await GraphObject.objects.filter(project=world["project"], key="city:lyon").acount() == 1
    continued = await AgentRun.objects.filter(conversation_id=conversation_id).order_by("started_at").alast()
    assert (continued.status, continued.worker) == ("success", again.worker)


def _waits_on_the_conversation() -> bool:
    with _other_connection() as other:
        row = other.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            " AND query LIKE 'UPDATE %%chat_conversations%%'"
        ).fetchone()
    return bool(row and row[0])

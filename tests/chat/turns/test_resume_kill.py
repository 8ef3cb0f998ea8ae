"""Issue #27: a turn outlives its process. Two real daphne processes (A, B) on the test database and
one redis-server; A runs an agent turn and is killed with SIGKILL at a chosen boundary; B takes the
turn over once its lease lapses and finishes it, and a client that followed the turn on A reconnects
to B with ``afterSeq`` and gets exactly the frames it missed.

The model is ``tests.llm_server`` answering from the request (``_script``): the first model call asks
for ``create_entity`` (the agent's tool policy lets it write without approval), the second streams
the answer. The test knows where A is by what it holds: the project's write lock (the write tool
blocks inside), a lock on ``kb.agent_run_events`` (A blocks storing the write's result, after the
write committed), or the model server's gate (A waits on a model call).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import tempfile
import threading
import time
from typing import Any

import httpx
import psycopg
import pytest
from django.db import connection
from websockets.asyncio.client import connect

from apps.agents.definitions import default_agents_install
from apps.agents.models import AgentDefinition, AgentRun, AgentRunToolCall
from apps.chat.models import Message
from apps.graph_tools.importer import IMPORT_LOCK_NAMESPACE
from apps.graph_tools.models import GraphChange, GraphObject
from bench.support import ServerProcess
from tests.chat.conftest import adb, session_cookie
from tests.chat.streams.test_multiprocess import ORIGIN, WAIT, _database_url, _start, _wait_ready, sse_frames
from tests.factories import make_token
from tests.llm_server import LLMTestServer, Stream, text_chunks, tool_call_chunks, tool_results
from tests.support.redis_server import redis_server

pytestmark = pytest.mark.django_db(transaction=True)

# Lower-case words: a capitalised one may begin a name, which waits for its next word (#47).
ANSWER_WORDS = [f"lyon{i} " for i in range(12)]
ANSWER = "".join(ANSWER_WORDS)
LEASE_SECONDS = 3


class Script:
    """The model: a ``create_entity`` call, then the answer; ``hold_answer`` holds the next answer
    (before its first chunk, or after ``hold_after`` chunks) until ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.held = threading.Event()
        self.hold_answer = False
        self.hold_after = 0
        self.hold_call = False

    def __call__(self, request: dict[str, Any]) -> Stream:
        if not tool_results(request):
            if self.hold_call:
                self.hold_call = False
                self.held.set()
                self.release.wait(WAIT)
            return Stream(
                tool_call_chunks(
                    "create_entity", {"key": "city:lyon", "type": "City", "name": "Lyon"}, call_id="w1"
                ),
                finish_reason="tool_calls",
            )
        if self.hold_answer:
            self.hold_answer = False
            self.held.set()
            return Stream(
                text_chunks(*ANSWER_WORDS), gate=self.release, gate_after=self.hold_after, gate_timeout=WAIT
            )
        return Stream(text_chunks(*ANSWER_WORDS))


class _CurrentScript:
    """The module's model server answers with the running test's ``Script``."""

    script: Script | None = None

    def __call__(self, request: dict[str, Any]) -> Stream:
        assert self.script is not None, "no test is running"
        return self.script(request)


@pytest.fixture(scope="module")
def _model_server():
    current = _CurrentScript()
    with LLMTestServer(responder=current) as server:
        yield server, current


@pytest.fixture
def script(_model_server):
    _server, current = _model_server
    current.script = Script()
    yield current.script
    current.script.release.set()  # nothing the test held stays held
    current.script = None


@pytest.fixture
def model(_model_server, script):
    server, _current = _model_server
    with server._lock:
        server.requests.clear()
    return server


@pytest.fixture(scope="module")
def _pair(django_db_setup, django_db_blocker, _model_server):
    """A and B for the whole module (each test kills A, which the next test starts again): starting
    and stopping two daphnes for every test was most of this module's time."""
    with django_db_blocker.unblock():
        database_url = _database_url()
    with redis_server() as redis_url, tempfile.TemporaryDirectory() as logdir:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "KGCHAT_MODEL": "openai/test",
            "OPENAI_BASE_URL": _model_server[0].base_url,
            "OPENAI_API_KEY": "test-key",
            "KGCHAT_TURN_LEASE_SECONDS": str(LEASE_SECONDS),
            "PYTHONUNBUFFERED": "1",
        }
        pair = {name: _start(name, env, logdir) for name in ("A", "B")}
        try:
            yield pair, env, logdir
        finally:
            for server in pair.values():
                server.stop(15)


@pytest.fixture
def servers(_pair):
    """Processes A and B on the test database, sharing one redis-server, both alive: one the
    previous test killed is started again first."""
    pair, env, logdir = _pair
    for name, server in pair.items():
        if server.process.poll() is not None:
            pair[name] = _start(name, env, logdir)
    for server in pair.values():
        _wait_ready(server)
    yield pair["A"], pair["B"]
    for server in pair.values():  # pytest shows it when the test failed
        print(f"--- daphne {server.name} (pid {server.process.pid}) ---")
        print(server.log.read_text(errors="replace")[-4000:])


@pytest.fixture
def writer(world):
    default_agents_install(project=world["project"])
    agent = AgentDefinition.objects.get(project=world["project"], name="graph-query-agent")
    agent.tools = ["create_entity"]
    agent.tool_policy = {"create_entity": {"approval": "never"}}
    agent.save()
    return agent


def _other_connection() -> psycopg.Connection:
    s = connection.settings_dict
    return psycopg.connect(
        dbname=s["NAME"],
        user=s["USER"],
        host=s["HOST"],
        port=s["PORT"] or None,
        password=s["PASSWORD"] or None,
    )


async def _until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not await condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.05)


def _kill(server: ServerProcess) -> float:
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(10)
    return time.monotonic()


async def _start_turn(server: ServerProcess, world, agent, token: str):
    http = httpx.AsyncClient(timeout=WAIT)
    request = http.build_request(
        "POST",
        f"{server.http}/api/chat/stream",
        json={
            "message": "Add Lyon",
            "projectId": str(world["project"].id),
            "agentDefinitionId": str(agent.id),
        },
        headers={"Authorization": f"Bearer {token}"},
    )
    response = await http.send(request, stream=True)
    return http, response, sse_frames(response)


async def _follow_on(server: ServerProcess, session: str, conversation_id: str, after_seq: int) -> list[dict]:
    """Reconnect to ``server`` and follow the turn from ``after_seq`` to its ``done``."""
    async with connect(server.ws, origin=ORIGIN, additional_headers={"Cookie": f"sessionid={session}"}) as ws:
        await ws.send(
            json.dumps({"type": "chat.subscribe", "conversationId": conversation_id, "afterSeq": after_seq})
        )
        frames: list[dict] = []
        while not frames or frames[-1]["type"] != "done":
            frames.append(json.loads(await asyncio.wait_for(ws.recv(), WAIT)))
    return frames


async def _check_the_turn_finished_on_b(
    before: list[dict], after: list[dict], b: ServerProcess, project
) -> AgentRun:
    frames = before + after
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1)), (
        "one seq order, nothing missed or twice"
    )
    assert "".join(f["token"] for f in frames if f["type"] == "token") == ANSWER
    chips = [(f["callId"], f["status"]) for f in frames if f["type"] == "mcp_tool"]
    assert chips.count(("w1", "completed")) == 1
    assert not [f for f in frames if f["type"] == "error"]
    done = frames[-1]
    assert done["type"] == "done" and done["messageId"]
    answer = await Message.objects.aget(id=done["messageId"])
    assert answer.content == ANSWER
    run = await AgentRun.objects.aget(id=frames[0]["runId"])
    assert (run.status, run.attempts, run.worker) == ("success", 2, b.worker)
    # The trace is whole: one record of the write, its result included, and every step.
    calls = [c async for c in AgentRunToolCall.objects.filter(run=run)]
    assert [(c.call_id, c.tool_name, bool(c.output)) for c in calls] == [("w1", "create_entity", True)]
    assert run.step_count == 2
    # The write ran once.
    assert await GraphObject.objects.filter(project=project, key="city:lyon").acount() == 1
    assert await GraphChange.objects.filter(project=project, action="create_entity").acount() == 1
    return run


async def test_killed_after_the_first_model_step_before_its_tool_runs(servers, world, writer, script, model):
    a, b = servers
    token = await adb(make_token)(world["user"])
    script.hold_call = True
    events_lock = await asyncio.to_thread(_other_connection)
    http, response, frames = await _start_turn(a, world, writer, token)
    try:
        before = [await anext(frames)]  # meta
        assert await asyncio.to_thread(script.held.wait, WAIT)
        # The model's call arrives; A blocks storing it: its step is over, its tool not run.
        events_lock.execute("LOCK TABLE kb.agent_run_events IN SHARE MODE")
        script.release.set()

        async def storing() -> bool:
            return await asyncio.to_thread(_waits_on_the_events_table)

        await _until(storing, "A waits to store the model's call")
        _kill(a)
        await response.aclose()
    finally:
        events_lock.rollback()
        events_lock.close()
        await http.aclose()

    after = await _follow_on(
        b, await adb(session_cookie)(world["user"]), before[0]["conversationId"], before[-1]["seq"]
    )

    await _check_the_turn_finished_on_b(before, after, b, world["project"])
    assert len(model.requests) == 3  # the unstored step is asked again, then the answer


def _waits_on_the_events_table() -> bool:
    with _other_connection() as other:
        row = other.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ' AND query LIKE \'%%INSERT INTO "kb"."agent_run_events"%%\''
        ).fetchone()
    return bool(row and row[0])


async def test_killed_during_its_write_tool_the_turn_finishes_on_the_other_process(
    servers, world, writer, script
):
    a, b = servers
    token = await adb(make_token)(world["user"])
    lock = await asyncio.to_thread(_other_connection)
    lock.execute(
        "SELECT pg_advisory_lock(%s, hashtext(%s))", [IMPORT_LOCK_NAMESPACE, str(world["project"].id)]
    )
    http, response, frames = await _start_turn(a, world, writer, token)
    try:
        before = [await anext(frames) for _ in range(2)]  # meta, the write tool started (blocked inside)
        assert before[1]["type"] == "mcp_tool" and before[1]["status"] == "started"
        _kill(a)
        await response.aclose()
    finally:
        lock.execute("SELECT pg_advisory_unlock_all()")
        lock.close()
        await http.aclose()

    after = await _follow_on(
        b, await adb(session_cookie)(world["user"]), before[0]["conversationId"], before[-1]["seq"]
    )

    # The call was recorded, not answered: B runs it (its chip starts again), once to the end.
    await _check_the_turn_finished_on_b(before, after, b, world["project"])


async def test_killed_right_after_its_write_committed_the_write_is_not_done_again(
    servers, world, writer, script
):
    a, b = servers
    token = await adb(make_token)(world["user"])
    write_lock = await asyncio.to_thread(_other_connection)
    write_lock.execute(
        "SELECT pg_advisory_lock(%s, hashtext(%s))", [IMPORT_LOCK_NAMESPACE, str(world["project"].id)]
    )
    events_lock = await asyncio.to_thread(_other_connection)
    http, response, frames = await _start_turn(a, world, writer, token)
    try:
        before = [await anext(frames) for _ in range(2)]  # meta, the write tool started
        # A may store no event now: the write commits, then A blocks storing its result.
        events_lock.execute("LOCK TABLE kb.agent_run_events IN SHARE MODE")
        write_lock.execute("SELECT pg_advisory_unlock_all()")

        async def written() -> bool:
            return await GraphObject.objects.filter(project=world["project"], key="city:lyon").aexists()

        await _until(written, "A's write committed")
        _kill(a)
        await response.aclose()
    finally:
        events_lock.rollback()
        events_lock.close()
        write_lock.close()
        await http.aclose()

    after = await _follow_on(
        b, await adb(session_cookie)(world["user"]), before[0]["conversationId"], before[-1]["seq"]
    )

    # B runs the recorded call again; its idempotency key answers A's result without writing.
    await _check_the_turn_finished_on_b(before, after, b, world["project"])


async def test_killed_after_the_tool_result_before_the_next_model_call(servers, world, writer, script, model):
    a, b = servers
    token = await adb(make_token)(world["user"])
    script.hold_answer = True  # A's second model call never answers
    http, response, frames = await _start_turn(a, world, writer, token)
    try:
        before = [await anext(frames) for _ in range(3)]  # meta, the write started, completed
        assert await asyncio.to_thread(script.held.wait, WAIT)
        _kill(a)
        await response.aclose()
    finally:
        script.release.set()
        await http.aclose()

    after = await _follow_on(
        b, await adb(session_cookie)(world["user"]), before[0]["conversationId"], before[-1]["seq"]
    )

    await _check_the_turn_finished_on_b(before, after, b, world["project"])
    assert len(model.requests) == 3  # the tool call once; the answer asked of A, then of B


async def test_killed_while_the_answer_streams_the_text_goes_on_without_repeating(
    servers, world, writer, script
):
    a, b = servers
    token = await adb(make_token)(world["user"])
    script.hold_answer, script.hold_after = True, 5  # A streams a few words, then waits
    http, response, frames = await _start_turn(a, world, writer, token)
    try:
        before = [await anext(frames) for _ in range(3)]
        while "".join(f["token"] for f in before if f["type"] == "token") != "".join(ANSWER_WORDS[:4]):
            before.append(await anext(frames))
        _kill(a)
        await response.aclose()
    finally:
        script.release.set()
        await http.aclose()

    after = await _follow_on(
        b, await adb(session_cookie)(world["user"]), before[0]["conversationId"], before[-1]["seq"]
    )

    await _check_the_turn_finished_on_b(before, after, b, world["project"])

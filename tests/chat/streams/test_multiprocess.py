"""Several server processes (issue 7): two real daphne processes and a real redis-server on loopback.

Each daphne is its own OS process (``.venv/bin/daphne config.asgi:application``) configured only
through its environment, as in production: ``REDIS_URL``, ``DATABASE_URL`` (the test database,
whose rows the tests commit), and the model ``openai/test`` served by ``tests.llm_server``, whose
slow streams keep a turn running while another process joins it. A turn running on process B is
followed and cancelled through process A; ``kb.agent_runs.worker`` names the pid that ran it.
"""

import asyncio
import json
import os
import runpy
import sys
import tempfile
import urllib.parse
from pathlib import Path

import httpx
import pytest
from django.db import connection
from websockets.asyncio.client import ClientConnection, connect

from apps.agents.models import AgentDefinition, AgentRun
from apps.chat.models import Message
from apps.chat.streams.redis_bus import BLOCK_MS, RedisFrameBus
from apps.graph_tools.models import GraphObject
from bench.support import ServerProcess as Server
from bench.support import start_daphne, wait_ready
from tests.chat.conftest import adb, agent_request, session_cookie
from tests.factories import make_token
from tests.llm_server import Stream, text_chunks, tool_call_chunks
from tests.support.redis_server import redis_server

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]
ORIGIN = "http://127.0.0.1"
WAIT = 30  # seconds: a guard against hanging, never a measured figure


def _database_url() -> str:
    s = connection.settings_dict
    host = urllib.parse.quote(s["HOST"] or "", safe="")
    password = f":{urllib.parse.quote(s['PASSWORD'], safe='')}" if s["PASSWORD"] else ""
    port = f":{s['PORT']}" if s["PORT"] else ""
    return f"postgresql://{s['USER']}{password}@{host}{port}/{s['NAME']}"


def one_process_env(model_url: str, lease_seconds: int | str) -> dict[str, str]:
    """The environment of one daphne of a ``make run`` (no ``REDIS_URL``) on the test database, its
    model the scripted OpenAI-compatible server at ``model_url`` (call with the database unblocked)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": _database_url(),
        "KGCHAT_MODEL": "openai/test",
        "OPENAI_BASE_URL": model_url,
        "OPENAI_API_KEY": "test-key",
        "KGCHAT_TURN_LEASE_SECONDS": str(lease_seconds),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("REDIS_URL", None)
    return env


def _start(name: str, env: dict[str, str], logdir: str) -> Server:
    return start_daphne(name, env=env, log=Path(logdir) / f"{name}.log")


def _wait_ready(server: Server) -> None:
    wait_ready(server, path="/accounts/login/", timeout=90)


@pytest.fixture(scope="module")
def servers(django_db_setup, django_db_blocker, llm):
    """Processes A and B on the test database, sharing one redis-server."""
    with django_db_blocker.unblock():
        database_url = _database_url()
    with redis_server() as redis_url, tempfile.TemporaryDirectory() as logdir:
        print("LOGDIR", logdir, file=sys.__stderr__)
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "KGCHAT_MODEL": "openai/test",
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "test-key",
            "PYTHONUNBUFFERED": "1",
        }
        started = [_start(name, env, logdir) for name in ("A", "B")]
        try:
            for server in started:
                _wait_ready(server)
            yield tuple(started)
        finally:
            for server in started:
                server.stop(15)


@pytest.fixture(autouse=True)
def server_logs(request):
    """Show the servers' output when a test fails (pytest prints what a failed test wrote)."""
    yield
    if "servers" in request.fixturenames:
        for server in request.getfixturevalue("servers"):
            print(f"--- daphne {server.name} (pid {server.process.pid}) ---")
            print(server.log.read_text(errors="replace")[-5000:])


@pytest.fixture
def model(llm):
    yield llm
    with llm._lock:
        llm.plans.clear()
        llm.requests.clear()


@pytest.fixture
def session(world):
    return session_cookie(world["user"])


def slow_answer(words: int, delay: float) -> Stream:
    return Stream(text_chunks(*[f"w{i} " for i in range(words)]), delay=delay)


def open_ws(server: Server, session: str):
    return connect(server.ws, origin=ORIGIN, additional_headers={"Cookie": f"sessionid={session}"})


async def recv(ws: ClientConnection) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), WAIT))


async def until_done(ws: ClientConnection) -> list[dict]:
    frames = [await recv(ws)]
    while frames[-1]["type"] != "done":
        frames.append(await recv(ws))
    return frames


async def sse_frames(response: httpx.Response):
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            yield json.loads(line[len("data: ") :])


def tokens(frames: list[dict]) -> str:
    return "".join(f["token"] for f in frames if f["type"] == "token")


async def test_client_on_a_follows_a_turn_running_on_b_from_after_seq(servers, world, agent, model, session):
    a, b = servers
    model.enqueue(
        Stream(
            tool_call_chunks("get_entity_edges", {"entity_id": "paris"}, call_id="c1"),
            finish_reason="tool_calls",
        ),
        slow_answer(30, 0.03),
    )

    async with open_ws(b, session) as on_b, open_ws(a, session) as on_a:
        await on_b.send(json.dumps({"type": "chat.message", **agent_request(world, agent)}))
        head = [await recv(on_b) for _ in range(4)]  # meta, tool started, tool completed, first token
        conversation_id = head[0]["conversationId"]
        await on_a.send(
            json.dumps(
                {"type": "chat.subscribe", "conversationId": conversation_id, "afterSeq": head[-1]["seq"]}
            )
        )
        followed = await until_done(on_a)
        on_b_all = head + await until_done(on_b)

    assert [f["type"] for f in head] == ["meta", "mcp_tool", "mcp_tool", "token"]
    assert head[0]["model"] == "openai/test"
    assert [f["seq"] for f in on_b_all] == list(range(1, len(on_b_all) + 1))
    assert followed == on_b_all[4:]
    assert tokens(on_b_all) == "".join(f"w{i} " for i in range(30))
    run = await AgentRun.objects.aget(id=head[0]["runId"])
    assert (run.status, run.worker) == ("success", b.worker)
    answer = await Message.objects.aget(id=on_b_all[-1]["messageId"])
    assert answer.content == tokens(on_b_all)


async def test_chat_cancel_sent_to_a_stops_the_sse_turn_running_on_b(servers, world, agent, model, session):
    a, b = servers
    token = await adb(make_token)(world["user"])
    model.enqueue(slow_answer(400, 0.05))

    async with httpx.AsyncClient(timeout=WAIT) as http, open_ws(a, session) as on_a:
        async with http.stream(
            "POST",
            f"{b.http}/api/chat/stream",
            json=agent_request(world, agent),
            headers={"Authorization": f"Bearer {token}"},
        ) as response:
            stream = sse_frames(response)
            on_b = [await anext(stream), await anext(stream)]  # meta, first token
            conversation_id = on_b[0]["conversationId"]
            await on_a.send(
                json.dumps(
                    {"type": "chat.subscribe", "conversationId": conversation_id, "afterSeq": on_b[-1]["seq"]}
                )
            )
            await on_a.send(json.dumps({"type": "chat.cancel", "conversationId": conversation_id}))
            seen_on_a = await until_done(on_a)
            on_b += [frame async for frame in stream]

    assert response.status_code == 200
    assert [f["type"] for f in on_b[-2:]] == ["error", "done"] and on_b[-2]["code"] == "cancelled"
    assert seen_on_a == on_b[2:]
    assert [f["seq"] for f in on_b] == list(range(1, len(on_b) + 1))
    run = await AgentRun.objects.aget(id=on_b[0]["runId"])
    assert (run.status, run.stop_reason, run.worker) == ("cancelled", "cancelled", b.worker)
    # The model's stream was abandoned: its last words were never spent.
    assert "w399" not in tokens(on_b)
    # What was shown is kept, with the stop reason.
    answer = await Message.objects.aget(id=on_b[-1]["messageId"])
    assert answer.content == tokens(on_b)
    assert answer.retrieval_context["stop_reason"] == "cancelled"


async def test_rest_cancel_sent_to_a_stops_the_websocket_turn_running_on_b(
    servers, world, agent, model, session
):
    a, b = servers
    token = await adb(make_token)(world["user"])
    model.enqueue(slow_answer(400, 0.05))

    async with httpx.AsyncClient(timeout=WAIT) as http, open_ws(b, session) as on_b:
        await on_b.send(json.dumps({"type": "chat.message", **agent_request(world, agent)}))
        frames = [await recv(on_b), await recv(on_b)]  # meta, first token
        conversation_id = frames[0]["conversationId"]
        cancelled = await http.post(
            f"{a.http}/api/chat/conversations/{conversation_id}/cancel",
            headers={"Authorization": f"Bearer {token}"},
        )
        frames += await until_done(on_b)
        again = await http.post(
            f"{a.http}/api/chat/conversations/{conversation_id}/cancel",
            headers={"Authorization": f"Bearer {token}"},
        )

    assert cancelled.status_code == 200 and cancelled.json() == {"cancelled": True}
    assert [f["type"] for f in frames[-2:]] == ["error", "done"] and frames[-2]["code"] == "cancelled"
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    run = await AgentRun.objects.aget(id=frames[0]["runId"])
    assert (run.status, run.worker) == ("cancelled", b.worker)
    assert again.json() == {"cancelled": False}


async def test_redis_reads_outlast_the_blocking_commands_they_wait_for(monkeypatch):
    # redis-py times reads out after 5 s by default, exactly as long as the frame bus's XREAD and
    # channels-redis's BZPOPMIN block: the read then raced the answer and the websocket consumer
    # died with close code 1011 (seen here on process B before the fix).
    from channels_redis.core import RedisChannelLayer

    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    settings = runpy.run_path(str(ROOT / "config" / "settings" / "base.py"))
    bus = RedisFrameBus("redis://127.0.0.1:1/0")

    (host,) = settings["CHANNEL_LAYERS"]["default"]["CONFIG"]["hosts"]
    assert host["socket_timeout"] > RedisChannelLayer.brpop_timeout
    assert bus._client().connection_pool.connection_kwargs["socket_timeout"] > BLOCK_MS / 1000


async def test_a_write_proposed_on_b_is_approved_through_a_and_the_answer_continues_on_a(
    servers, world, agent, model, session
):
    a, b = servers
    curator = await AgentDefinition.objects.aget(project=world["project"], name="graph-curator-agent")
    model.enqueue(
        Stream(
            tool_call_chunks("update_entity", {"entity_id": "paris", "name": "Paris, France"}, call_id="w1"),
            finish_reason="tool_calls",
        ),
        Stream(text_chunks("Renamed.")),
    )

    async with open_ws(b, session) as on_b, open_ws(a, session) as on_a:
        await on_b.send(json.dumps({"type": "chat.message", **agent_request(world, curator)}))
        paused = await until_done(on_b)
        card = next(f for f in paused if f["type"] == "approval_required")
        await on_a.send(
            json.dumps({"type": "chat.approval", "approvalId": card["approvalId"], "decision": "approve"})
        )
        decided = await recv(on_a)
        continued = await until_done(on_a)

    assert decided["type"] == "approval_decided" and decided["status"] == "approved"
    assert tokens(continued) == "Renamed."
    assert (await GraphObject.objects.aget(id=world["paris"].id)).name == "Paris, France"
    first, second = [await AgentRun.objects.aget(id=f[0]["runId"]) for f in (paused, continued)]
    assert (first.worker, first.stop_reason) == (b.worker, "approval_required")
    assert (second.worker, second.status) == (a.worker, "success")

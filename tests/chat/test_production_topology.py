"""The production topology run for real (issue #16 item 5), from Debian packages instead of Docker.

``docker-compose.yml`` puts Caddy (``deploy/Caddyfile``) in front of two daphne processes on
``config.settings.production``, Redis and PostgreSQL; ``tests.support.production_topology`` runs
the same Caddyfile with Debian's ``caddy`` in the documented plain-HTTP trial mode in front of
two daphne processes, a real redis-server and the test database. The model ``openai/test``
(``tests.llm_server``) is the one stand-in; every request goes through Caddy unless a test says.

Caddy's ``least_conn`` policy sends a request to the process with fewer requests in flight, so
while a turn streams from one process the next connection reaches the other.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect

from apps.agents.models import AgentRun
from apps.chat.models import Message
from bench.support import ServerProcess
from tests.chat.conftest import adb, agent_request
from tests.chat.streams.test_multiprocess import (
    WAIT,
    _database_url,
    slow_answer,
    sse_frames,
    tokens,
    until_done,
)
from tests.factories import make_token
from tests.llm_server import Stream, text_chunks
from tests.support.production_topology import (
    CADDY,
    CADDY_MISSING,
    ROOT,
    Topology,
    production_topology,
    set_production_password,
)

PASSWORD = "pw-for-tests-1"  # tests.factories.make_user's

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(CADDY is None, reason=CADDY_MISSING),
]


@pytest.fixture(scope="module")
def topology(django_db_setup, django_db_blocker, llm) -> Iterator[Topology]:
    with django_db_blocker.unblock():
        database_url = _database_url()
    with production_topology(
        database_url=database_url, model="openai/test", llm_base_url=llm.base_url
    ) as topology:
        yield topology


@pytest.fixture(autouse=True)
def server_logs(request):
    """Show the servers' output when a test fails (pytest prints what a failed test wrote)."""
    yield
    if "topology" in request.fixturenames:
        print(request.getfixturevalue("topology").logs())


@pytest.fixture
def model(llm):
    yield llm
    with llm._lock:
        llm.plans.clear()
        llm.requests.clear()


@pytest.fixture
def session(topology, world):
    """The session id of ``world``'s user, logged in through Caddy with the login form."""
    user = world["user"]
    set_production_password(user, PASSWORD)
    with httpx.Client(base_url=topology.http) as browser:
        form = browser.get("/accounts/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
        login = browser.post(
            "/accounts/login/",
            data={"username": user.username, "password": PASSWORD, "csrfmiddlewaretoken": csrf},
        )
    assert login.status_code == 302 and login.headers["location"] == "/chat/"
    return login.cookies["sessionid"]


def open_ws(topology: Topology, session: str):
    return connect(topology.ws, origin=topology.http, additional_headers={"Cookie": f"sessionid={session}"})


def websocket_connects(server: ServerProcess) -> int:
    """How many websockets daphne's access log says ``server`` accepted."""
    return server.output().count('"WSCONNECT /ws/chat/"')


def test_caddy_serves_the_collected_static_files_and_the_app_processes_do_not(topology):
    source = (ROOT / "static" / "chat" / "chat.js").read_bytes()

    through_caddy = httpx.get(f"{topology.http}/static/chat/chat.js")
    from_app = httpx.get(f"{topology.apps['A'].http}/static/chat/chat.js")
    login = httpx.get(f"{topology.http}/accounts/login/")

    assert through_caddy.status_code == 200 and through_caddy.content == source
    assert through_caddy.headers["server"] == "Caddy"
    assert from_app.status_code == 404
    assert login.status_code == 200 and "/static/" in login.text


def test_the_plain_http_trial_logs_in_with_cookies_a_browser_keeps_over_http(topology, world):
    set_production_password(world["user"], PASSWORD)

    with httpx.Client(base_url=topology.http) as browser:
        form = browser.get("/accounts/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
        login = browser.post(
            "/accounts/login/",
            data={"username": world["user"].username, "password": PASSWORD, "csrfmiddlewaretoken": csrf},
        )
        chat = browser.get("/chat/")

    cookies = form.headers.get_list("set-cookie") + login.headers.get_list("set-cookie")
    assert login.status_code == 302 and login.headers["location"] == "/chat/"
    assert {c.split("=", 1)[0] for c in cookies} == {"csrftoken", "sessionid"}
    # DJANGO_SECURE_COOKIES=false: a browser drops Secure cookies set by an http:// site.
    assert not [c for c in cookies if "secure" in c.lower()]
    assert chat.status_code == 200


async def test_a_websocket_turn_streams_to_done_through_caddy(topology, world, agent, model, session):
    model.enqueue(Stream(text_chunks("Paris ", "is ", "the ", "capital.")))

    async with open_ws(topology, session) as ws:
        await ws.send(json.dumps({"type": "chat.message", **agent_request(world, agent)}))
        frames = await until_done(ws)

    assert frames[0]["type"] == "meta" and frames[0]["model"] == "openai/test"
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert tokens(frames) == "Paris is the capital."
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert answer.content == "Paris is the capital."


async def test_an_sse_turn_streams_to_done_through_caddy(topology, world, agent, model):
    token = await adb(make_token)(world["user"])
    model.enqueue(Stream(text_chunks("Paris ", "is ", "on ", "the Seine.")))

    async with httpx.AsyncClient(timeout=WAIT) as http:
        async with http.stream(
            "POST",
            f"{topology.http}/api/chat/stream",
            json=agent_request(world, agent),
            headers={"Authorization": f"Bearer {token}"},
        ) as response:
            frames = [frame async for frame in sse_frames(response)]

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert (frames[0]["type"], frames[-1]["type"]) == ("meta", "done")
    assert tokens(frames) == "Paris is on the Seine."
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert answer.content == "Paris is on the Seine."


async def test_a_turn_started_through_a_is_followed_and_cancelled_through_b(
    topology, world, agent, model, session
):
    # Without Caddy flushing every frame (flush_interval -1) the first token would only arrive
    # with the end of this 100-second answer, after WAIT: the stream is read frame by frame.
    token = await adb(make_token)(world["user"])
    model.enqueue(slow_answer(2000, 0.05))

    async with httpx.AsyncClient(timeout=WAIT) as http:
        async with http.stream(
            "POST",
            f"{topology.http}/api/chat/stream",
            json=agent_request(world, agent),
            headers={"Authorization": f"Bearer {token}"},
        ) as response:
            stream = sse_frames(response)
            on_a = [await anext(stream), await anext(stream)]  # meta, first token
            a = topology.worker((await AgentRun.objects.aget(id=on_a[0]["runId"])).worker)
            (b,) = [s for s in topology.apps.values() if s is not a]
            before = {s.name: websocket_connects(s) for s in (a, b)}
            async with open_ws(topology, session) as on_b:
                await on_b.send(
                    json.dumps(
                        {"type": "chat.subscribe", "conversationId": on_a[0]["conversationId"], "afterSeq": 2}
                    )
                )
                await on_b.send(
                    json.dumps({"type": "chat.cancel", "conversationId": on_a[0]["conversationId"]})
                )
                seen_on_b = await until_done(on_b)
            on_a += [frame async for frame in stream]

    assert (websocket_connects(a), websocket_connects(b)) == (before[a.name], before[b.name] + 1)
    assert [f["type"] for f in on_a[-2:]] == ["error", "done"] and on_a[-2]["code"] == "cancelled"
    assert seen_on_b == on_a[2:]
    assert [f["seq"] for f in on_a] == list(range(1, len(on_a) + 1))
    assert "w1999" not in tokens(on_a)
    run = await AgentRun.objects.aget(id=on_a[0]["runId"])
    assert (run.status, run.stop_reason, run.worker) == ("cancelled", "cancelled", a.worker)
    answer = await Message.objects.aget(id=on_a[-1]["messageId"])
    assert answer.content == tokens(on_a)


async def test_an_app_process_killed_mid_turn_leaves_the_other_serving_and_its_turn_goes_on_there(
    topology, world, agent, model, session
):
    token = await adb(make_token)(world["user"])
    model.enqueue(slow_answer(2000, 0.05))
    whole = "".join(f"w{i} " for i in range(2000))

    async with httpx.AsyncClient(timeout=WAIT, headers={"Authorization": f"Bearer {token}"}) as http:
        request = http.build_request(
            "POST", f"{topology.http}/api/chat/stream", json=agent_request(world, agent)
        )
        response = await http.send(request, stream=True)
        stream = sse_frames(response)
        head = [await anext(stream), await anext(stream)]
        run_id, killed_conversation = head[0]["runId"], head[0]["conversationId"]
        killed = topology.worker((await AgentRun.objects.aget(id=run_id)).worker)
        (survivor,) = [s for s in topology.apps.values() if s is not killed]
        os.kill(killed.process.pid, signal.SIGKILL)
        killed.process.wait(10)
        await response.aclose()

        # The browser reconnects (through Caddy: the survivor) and follows the turn from where it
        # was: the survivor takes it over once its lease lapses; the model call cut off is redone.
        model.enqueue(slow_answer(2000, 0))
        async with open_ws(topology, session) as ws:
            await ws.send(
                json.dumps(
                    {
                        "type": "chat.subscribe",
                        "conversationId": killed_conversation,
                        "afterSeq": head[-1]["seq"],
                    }
                )
            )
            followed = await until_done(ws)

        model.enqueue(Stream(text_chunks("Still ", "here.")))
        async with open_ws(topology, session) as ws:
            await ws.send(
                json.dumps({"type": "chat.message", **agent_request(world, agent, "Are you there?")})
            )
            after_kill = await until_done(ws)
        listed_after_kill = await http.get(f"{topology.http}/api/chat/conversations")

        # The killed process starts again (compose: restart policy) and serves.
        restarted = await asyncio.to_thread(topology.restart, killed)
        page = (await http.get(f"{topology.http}/api/chat/conversations/{killed_conversation}")).json()
        run = (await http.get(f"{topology.http}/api/agent-runs/{run_id}")).json()

    frames = head + followed
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert tokens(frames) == whole
    assert not [f for f in frames if f["type"] == "error"] and frames[-1]["type"] == "done"
    assert tokens(after_kill) == "Still here."
    new_run = await AgentRun.objects.aget(id=after_kill[0]["runId"])
    assert (new_run.status, new_run.worker) == ("success", survivor.worker)
    assert listed_after_kill.status_code == 200
    assert restarted.process.poll() is None
    answers = [m for m in page["messages"] if m["role"] == "assistant"]
    assert [a["content"] for a in answers] == [whole]
    assert (run["status"], run["stopReason"]) == ("success", "completed")
    resumed = await AgentRun.objects.aget(id=run_id)
    assert (resumed.attempts, resumed.worker) == (2, survivor.worker)

"""What a resumable turn costs and how soon a killed turn goes on (issue #27).

1. **Storing events.** Agent turns through the executor with the scripted model (one
   ``list_entity_types`` call, then a 200-token answer) at conversation lengths 1 and 50: the time
   spent in ``agent_run_events_append`` (each a statement on the turn's thread), per call (one
   complete ADK event: a model step or a tool result; the first also carries the history window)
   and per turn, the rows a turn stores, and the whole turn's time.
2. **Kill → next frame.** Two daphne processes on the test database and a redis-server, the model
   served by ``tests.llm_server``; process A runs an agent turn whose answer is held mid-stream, a
   client follows it on B; A is killed with SIGKILL. Measured: from the kill to the first frame of
   the resumed turn at the client, with ``KGCHAT_TURN_LEASE_SECONDS`` 3 and 6 (the default).
3. **One process, restarted.** One daphne and no Redis (``make run``); its agent turn's answer is
   held mid-stream (its mark saved), the process is killed with SIGKILL and started again at once
   on the same port. Measured: from the kill to the new process listening, and to the resumed
   turn's first frame at a websocket client that reconnects as soon as it listens (``afterSeq``).

Run: ``make bench`` (all) or ``.venv/bin/python -m bench turn_resume``.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

LENGTHS = (1, 50)
REPEATS = int(os.environ.get("BENCH_RESUME_REPEATS", "20"))
KILLS = int(os.environ.get("BENCH_RESUME_KILLS", "3"))


def _history(turns: int) -> list[Any]:
    from bench.turn_overhead import _history as history

    return history(turns)


async def _store_cost(definition: Any, turns: int, *, store: bool = True) -> dict[str, float]:
    from apps.agents import services
    from apps.agents.executor import AgentExecutor, ExecuteRequest
    from apps.agents.models import AgentRunEvent
    from bench.turn_overhead import _provider

    append = services.agent_run_events_append
    calls: list[float] = []
    rows: list[int] = []

    async def timed(*, run_id: Any, rows: Any) -> None:
        started = time.perf_counter()
        if store:  # else: the turn as it would be without storing its events (not resumable)
            await append(run_id=run_id, rows=rows)
        calls.append(time.perf_counter() - started)

    services.agent_run_events_append = timed  # type: ignore[assignment]
    per_turn: list[float] = []
    stored: list[int] = []
    try:
        for i in range(REPEATS + 2):
            calls.clear()
            request = ExecuteRequest(
                agent_definition=definition,
                message="Which types exist?",
                history=_history(turns - 1),
                provider=_provider(),
            )
            started = time.perf_counter()
            result = await AgentExecutor().execute(request)
            elapsed = time.perf_counter() - started
            if result.status != "success":
                raise RuntimeError(f"bench turn failed: {result.error}")
            if i >= 2:
                per_turn.append(elapsed)
                rows.append(len(calls))
                stored.append(
                    await AgentRunEvent.objects.filter(run_id=result.run_id).acount() if store else 0
                )
                appends = list(calls)
                per_turn_append = sum(appends)
                calls.clear()
                _store_cost.samples.append((appends, per_turn_append))  # type: ignore[attr-defined]
    finally:
        services.agent_run_events_append = append  # type: ignore[assignment]
    samples = _store_cost.samples  # type: ignore[attr-defined]
    every = [a for appends, _ in samples for a in appends]
    totals = [t for _, t in samples]
    _store_cost.samples = []  # type: ignore[attr-defined]
    return {
        "turn_ms": statistics.median(per_turn) * 1000,
        "append_ms": statistics.median(every) * 1000,
        "appends": statistics.median(rows),
        "store_ms_per_turn": statistics.median(totals) * 1000,
        "rows_per_turn": statistics.median(stored),
    }


_store_cost.samples = []  # type: ignore[attr-defined]


async def _store_costs() -> dict[int, dict[str, float]]:
    from asgiref.sync import sync_to_async

    from apps.agents.models import AgentDefinition
    from apps.projects.models import Project

    def setup() -> tuple[Project, AgentDefinition]:
        project, _ = Project.objects.get_or_create(
            slug="bench-turn-resume", defaults={"name": "bench turn resume"}
        )
        definition, _ = AgentDefinition.objects.update_or_create(
            project=project,
            name="bench-agent",
            defaults={
                "system_prompt": "Answer from the graph.",
                "tools": ["list_entity_types"],
                "max_steps": 5,
            },
        )
        return project, definition

    project, definition = await sync_to_async(setup)()
    try:
        costs = {n: await _store_cost(definition, n) for n in LENGTHS}
        for n in LENGTHS:
            costs[n]["turn_ms_unstored"] = (await _store_cost(definition, n, store=False))["turn_ms"]
        return costs
    finally:
        await sync_to_async(project.delete)()


def _database_url() -> str:
    from django.db import connection

    s = connection.settings_dict
    host = urllib.parse.quote(s["HOST"] or "", safe="")
    password = f":{urllib.parse.quote(s['PASSWORD'], safe='')}" if s["PASSWORD"] else ""
    port = f":{s['PORT']}" if s["PORT"] else ""
    return f"postgresql://{s['USER']}{password}@{host}{port}/{s['NAME']}"


def _kill_to_next_frame(lease: int) -> list[float]:
    """Seconds from SIGKILL of the process running a turn to the resumed turn's first frame."""
    import httpx
    from websockets.sync.client import connect

    from apps.agents.definitions import default_agents_install
    from apps.agents.models import AgentDefinition
    from bench.support import redis_server, start_daphne, wait_ready
    from tests.factories import make_project, make_token, make_user
    from tests.llm_server import LLMTestServer, Stream, text_chunks

    release = threading.Event()
    held = threading.Event()
    hold = {"next": True}
    words = [f"w{i} " for i in range(40)]

    def script(request: dict[str, Any]) -> Stream:
        if hold["next"]:
            hold["next"] = False
            held.set()
            return Stream(text_chunks(*words), gate=release, gate_after=5, gate_timeout=60)
        return Stream(text_chunks(*words))

    user = make_user(f"bench-resume-{lease}-{time.monotonic_ns()}")
    project = make_project(owner=user, name=f"bench resume {time.monotonic_ns()}")
    default_agents_install(project=project)
    agent = AgentDefinition.objects.get(project=project, name="graph-query-agent")
    agent.tools = []
    agent.save()
    token = make_token(user)
    from django.test import Client

    browser = Client()
    browser.force_login(user)
    session = browser.cookies["sessionid"].value
    timings: list[float] = []
    try:
        with (
            LLMTestServer(responder=script) as model,
            redis_server() as (redis_url, _),
            tempfile.TemporaryDirectory() as logdir,
        ):
            env = {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "config.settings.test",
                "DATABASE_URL": _database_url(),
                "REDIS_URL": redis_url,
                "KGCHAT_MODEL": "openai/test",
                "OPENAI_BASE_URL": model.base_url,
                "OPENAI_API_KEY": "bench-key",
                "KGCHAT_TURN_LEASE_SECONDS": str(lease),
            }
            b = start_daphne("B", env=env, log=Path(logdir) / "B.log")
            try:
                wait_ready(b, path="/accounts/login/")
                for attempt in range(KILLS):
                    hold["next"], release = True, threading.Event()
                    held.clear()
                    a = start_daphne(f"A{attempt}", env=env, log=Path(logdir) / f"A{attempt}.log")
                    try:
                        wait_ready(a, path="/accounts/login/")
                        with (
                            httpx.Client(timeout=60) as http,
                            http.stream(
                                "POST",
                                f"{a.http}/api/chat/stream",
                                json={
                                    "message": "hi",
                                    "projectId": str(project.id),
                                    "agentDefinitionId": str(agent.id),
                                },
                                headers={"Authorization": f"Bearer {token}"},
                            ) as response,
                        ):
                            seen: list[dict[str, Any]] = []
                            if response.status_code != 200:
                                raise RuntimeError(
                                    f"the turn was refused: {response.status_code} {response.read()!r}\n{a.tail(40)}"
                                )
                            for line in response.iter_lines():
                                if line.startswith("data: "):
                                    seen.append(json.loads(line[6:]))
                                if seen and seen[-1]["type"] == "token":
                                    break  # A streams, then waits on the model
                            with connect(
                                b.ws,
                                origin="http://127.0.0.1",
                                additional_headers={"Cookie": f"sessionid={session}"},
                            ) as ws:
                                ws.send(
                                    json.dumps(
                                        {
                                            "type": "chat.subscribe",
                                            "conversationId": seen[0]["conversationId"],
                                            "afterSeq": seen[-1]["seq"],
                                        }
                                    )
                                )
                                # What A published so far reaches the client first: not the resumed turn's.
                                while True:
                                    try:
                                        ws.recv(timeout=0.5)
                                    except TimeoutError:
                                        break
                                os.kill(a.process.pid, signal.SIGKILL)
                                killed = time.monotonic()
                                a.process.wait(10)
                                release.set()
                                json.loads(ws.recv(timeout=60))
                                timings.append(time.monotonic() - killed)
                                while json.loads(ws.recv(timeout=60))["type"] != "done":
                                    pass
                    finally:
                        release.set()
                        a.stop(5)
            finally:
                b.stop(15)
    finally:
        project.delete()
        user.delete()
    return timings


class LLMServerHolding:
    """``tests.llm_server`` answering ``words`` words; after ``hold``, its next answer stops after
    5 of them until ``release``."""

    def __init__(self, words: int) -> None:
        from tests.llm_server import LLMTestServer

        self.words = [f"w{i} " for i in range(words)]
        self.gate = threading.Event()
        self.held_next = False
        self.server = LLMTestServer(responder=self._answer)

    def __enter__(self) -> LLMServerHolding:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate.set()
        self.server.__exit__(*exc)

    @property
    def base_url(self) -> str:
        return str(self.server.base_url)

    def hold(self) -> None:
        self.gate, self.held_next = threading.Event(), True

    def release(self) -> None:
        self.gate.set()

    def _answer(self, request: dict[str, Any]) -> Any:
        from tests.llm_server import Stream, text_chunks

        if self.held_next:
            self.held_next = False
            return Stream(text_chunks(*self.words), gate=self.gate, gate_after=5, gate_timeout=60)
        return Stream(text_chunks(*self.words))


def _resume_world(lease: int) -> dict[str, Any]:
    """A user (with an API token and a session) and a project whose agent has no tools."""
    from django.test import Client

    from apps.agents.definitions import default_agents_install
    from apps.agents.models import AgentDefinition
    from tests.factories import make_project, make_token, make_user

    user = make_user(f"bench-resume-{lease}-{time.monotonic_ns()}")
    project = make_project(owner=user, name=f"bench resume {time.monotonic_ns()}")
    default_agents_install(project=project)
    agent = AgentDefinition.objects.get(project=project, name="graph-query-agent")
    agent.tools = []
    agent.save()
    browser = Client()
    browser.force_login(user)
    return {
        "user": user,
        "project": project,
        "agent": agent,
        "token": make_token(user),
        "session": browser.cookies["sessionid"].value,
    }


def _env(model_url: str, lease: int) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": _database_url(),
        "KGCHAT_MODEL": "openai/test",
        "OPENAI_BASE_URL": model_url,
        "OPENAI_API_KEY": "bench-key",
        "KGCHAT_TURN_LEASE_SECONDS": str(lease),
    }


def _streamed_until_held(http: Any, server: Any, setup: dict[str, Any]) -> list[dict[str, Any]]:
    """Start an agent turn on ``server`` over SSE; its frames until the model holds (4 words)."""
    body = {
        "message": "hi",
        "projectId": str(setup["project"].id),
        "agentDefinitionId": str(setup["agent"].id),
    }
    headers = {"Authorization": f"Bearer {setup['token']}"}
    seen: list[dict[str, Any]] = []
    with http.stream("POST", f"{server.http}/api/chat/stream", json=body, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"the turn was refused: {response.status_code}\n{server.tail(40)}")
        for line in response.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
            if "".join(f.get("token", "") for f in seen).count(" ") == 4:  # its first chunk: no text
                return seen
    raise RuntimeError(f"the turn ended before its model held:\n{server.tail(40)}")


def _until_mark(conversation_id: str, seq: int) -> None:
    """Wait until the turn's saved mark counts its frames up to ``seq`` (its text paused)."""
    from apps.chat.models import Conversation

    deadline = time.monotonic() + 30
    while Conversation.objects.get(id=conversation_id).active_turn_shown.get("seq") != seq:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the turn's mark never reached seq {seq}")
        time.sleep(0.05)


def _first_frame_after_restart(server: Any, session: str, seen: list[dict[str, Any]]) -> float:
    """Connect to the restarted ``server`` as soon as it listens (as the page retries) and
    subscribe after the last frame seen; the monotonic time its first frame arrives."""
    from websockets.sync.client import connect

    while True:
        try:
            ws = connect(
                server.ws, origin="http://127.0.0.1", additional_headers={"Cookie": f"sessionid={session}"}
            )
            break
        except OSError:
            time.sleep(0.02)
    with ws:
        conversation = seen[0]["conversationId"]
        ws.send(
            json.dumps(
                {"type": "chat.subscribe", "conversationId": conversation, "afterSeq": seen[-1]["seq"]}
            )
        )
        json.loads(ws.recv(timeout=60))
        arrived = time.monotonic()
        while json.loads(ws.recv(timeout=60))["type"] != "done":
            pass
    return arrived


def _restart_to_next_frame(lease: int) -> list[tuple[float, float]]:
    """One daphne, no Redis (``make run``): SIGKILL mid-answer (the turn's mark saved), started
    again at once on the same port. Per kill: (seconds from the kill to the restarted process
    listening, from the kill to the resumed turn's first frame at a client reconnected then)."""
    import httpx

    from bench.support import free_port, start_daphne, wait_ready

    setup = _resume_world(lease)
    port, timings, started = free_port(), [], []
    try:
        with LLMServerHolding(words=40) as model, tempfile.TemporaryDirectory() as logdir:
            env = {**_env(model.base_url, lease), "REDIS_URL": ""}
            started.append(start_daphne("one0", env=env, log=Path(logdir) / "one0.log", port=port))
            for kill in range(KILLS):
                model.hold()
                wait_ready(started[-1], path="/accounts/login/")
                with httpx.Client(timeout=60) as http:
                    seen = _streamed_until_held(http, started[-1], setup)
                _until_mark(seen[0]["conversationId"], seen[-1]["seq"])
                os.kill(started[-1].process.pid, signal.SIGKILL)
                killed = time.monotonic()
                started[-1].process.wait(10)
                model.release()
                log = Path(logdir) / f"one{kill + 1}.log"
                started.append(start_daphne(f"one{kill + 1}", env=env, log=log, port=port))
                wait_ready(started[-1])
                listening = time.monotonic()
                arrived = _first_frame_after_restart(started[-1], setup["session"], seen)
                timings.append((listening - killed, arrived - killed))
    finally:
        for server in started:
            server.stop(15)
        setup["project"].delete()
        setup["user"].delete()
    return timings


def run() -> None:
    from asgiref.sync import async_to_sync

    costs = async_to_sync(_store_costs)()
    print("storing ADK session events (kb.agent_run_events), scripted model, one tool call + answer:")
    for turns, c in costs.items():
        print(
            f"  conversation of {turns:>3} turns: {c['appends']:.0f} appends/turn, {c['rows_per_turn']:.0f} rows/turn, "
            f"{c['append_ms']:.2f} ms/append (median), {c['store_ms_per_turn']:.1f} ms/turn storing, "
            f"turn {c['turn_ms']:.1f} ms (not storing: {c['turn_ms_unstored']:.1f} ms)"
        )
    for lease in (3, 6):
        timings = _kill_to_next_frame(lease)
        print(
            f"SIGKILL -> the resumed turn's next frame at the client (lease {lease} s, {len(timings)} kills): "
            f"median {statistics.median(timings):.2f} s, max {max(timings):.2f} s"
        )
    for lease in (3, 6):
        restarts = _restart_to_next_frame(lease)
        listening = [r[0] for r in restarts]
        frame = [r[1] for r in restarts]
        print(
            f"one process, no Redis: SIGKILL, started again at once (lease {lease} s, {len(restarts)} kills): "
            f"listening again after median {statistics.median(listening):.2f} s (max {max(listening):.2f}); "
            f"the resumed turn's next frame at a client reconnected then: median {statistics.median(frame):.2f} s "
            f"(max {max(frame):.2f}), {statistics.median(frame) - statistics.median(listening):.2f} s after listening"
        )


if __name__ == "__main__":
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    django.setup()
    run()

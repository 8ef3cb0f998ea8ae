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
import time
from pathlib import Path
from typing import Any

from bench._turn_resume_store import store_costs
from bench._turn_resume_world import (
    LLMServerHolding,
    first_frame_after_restart,
    resume_world,
    server_env,
    streamed_until_held,
    until_mark,
)

KILLS = int(os.environ.get("BENCH_RESUME_KILLS", "3"))


def _kill_to_next_frame(lease: int) -> list[float]:
    """Two daphne processes and a redis-server: per kill, seconds from SIGKILL of the process running
    a turn (A) to the resumed turn's first frame at a client following it on B."""
    from bench.support import redis_server, start_daphne, wait_ready

    setup = resume_world(lease)
    timings: list[float] = []
    try:
        with (
            LLMServerHolding(words=40) as model,
            redis_server() as (redis_url, _),
            tempfile.TemporaryDirectory() as logdir,
        ):
            env = {**server_env(model.base_url, lease), "REDIS_URL": redis_url}
            b = start_daphne("B", env=env, log=Path(logdir) / "B.log")
            try:
                wait_ready(b, path="/accounts/login/")
                for attempt in range(KILLS):
                    model.hold()
                    a = start_daphne(f"A{attempt}", env=env, log=Path(logdir) / f"A{attempt}.log")
                    try:
                        wait_ready(a, path="/accounts/login/")
                        timings.append(_killed_while_followed(a, b, setup, model))
                    finally:
                        model.release()
                        a.stop(5)
            finally:
                b.stop(15)
    finally:
        setup["project"].delete()
        setup["user"].delete()
    return timings


def _killed_while_followed(a: Any, b: Any, setup: dict[str, Any], model: LLMServerHolding) -> float:
    """Start a turn on ``a`` over SSE and, once it streams, follow it from ``b``'s websocket; SIGKILL
    ``a`` with its SSE response still open: seconds to the resumed turn's first frame at the client."""
    import httpx
    from websockets.sync.client import connect

    body = {
        "message": "hi",
        "projectId": str(setup["project"].id),
        "agentDefinitionId": str(setup["agent"].id),
    }
    headers = {"Authorization": f"Bearer {setup['token']}"}
    with (
        httpx.Client(timeout=60) as http,
        http.stream("POST", f"{a.http}/api/chat/stream", json=body, headers=headers) as response,
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
        cookie = {"Cookie": f"sessionid={setup['session']}"}
        with connect(b.ws, origin="http://127.0.0.1", additional_headers=cookie) as ws:
            subscribe = {
                "type": "chat.subscribe",
                "conversationId": seen[0]["conversationId"],
                "afterSeq": seen[-1]["seq"],
            }
            ws.send(json.dumps(subscribe))
            # What A published so far reaches the client first: not the resumed turn's.
            while True:
                try:
                    ws.recv(timeout=0.5)
                except TimeoutError:
                    break
            os.kill(a.process.pid, signal.SIGKILL)
            killed = time.monotonic()
            a.process.wait(10)
            model.release()
            json.loads(ws.recv(timeout=60))
            elapsed = time.monotonic() - killed
            while json.loads(ws.recv(timeout=60))["type"] != "done":
                pass
    return elapsed


def _restart_to_next_frame(lease: int) -> list[tuple[float, float]]:
    """One daphne, no Redis (``make run``): SIGKILL mid-answer (the turn's mark saved), started
    again at once on the same port. Per kill: (seconds from the kill to the restarted process
    listening, from the kill to the resumed turn's first frame at a client reconnected then)."""
    import httpx

    from bench.support import free_port, start_daphne, wait_ready

    setup = resume_world(lease)
    port, timings, started = free_port(), [], []
    try:
        with LLMServerHolding(words=40) as model, tempfile.TemporaryDirectory() as logdir:
            env = {**server_env(model.base_url, lease), "REDIS_URL": ""}
            started.append(start_daphne("one0", env=env, log=Path(logdir) / "one0.log", port=port))
            for kill in range(KILLS):
                model.hold()
                wait_ready(started[-1], path="/accounts/login/")
                with httpx.Client(timeout=60) as http:
                    seen = streamed_until_held(http, started[-1], setup)
                until_mark(seen[0]["conversationId"], seen[-1]["seq"])
                os.kill(started[-1].process.pid, signal.SIGKILL)
                killed = time.monotonic()
                started[-1].process.wait(10)
                model.release()
                log = Path(logdir) / f"one{kill + 1}.log"
                started.append(start_daphne(f"one{kill + 1}", env=env, log=log, port=port))
                wait_ready(started[-1])
                listening = time.monotonic()
                arrived = first_frame_after_restart(started[-1], setup["session"], seen)
                timings.append((listening - killed, arrived - killed))
    finally:
        for server in started:
            server.stop(15)
        setup["project"].delete()
        setup["user"].delete()
    return timings


def run() -> None:
    from asgiref.sync import async_to_sync

    costs = async_to_sync(store_costs)()
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

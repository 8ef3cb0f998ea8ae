"""Streaming load: N agent turns at once over websockets, the model streaming at a served model's pace.

The model (``scripted/bench-paced`` of ``bench._stream_load_server``) answers every request after
a first-token delay (``BENCH_FIRST_TOKEN_S``, 0.5 s) and then streams ``BENCH_TOKENS_PER_S`` (50)
tokens a second. A turn of graph-query-agent makes two requests: the first answers with one
``get_entity_edges`` call, the second with ``BENCH_TOKENS`` (200) one-word deltas ``t0 t1 …``. So
the model alone puts its first text token 2 × 0.5 s after the question, and each next one 20 ms
after the previous; everything beyond that is what kgchat adds.

For each level of concurrent turns (``--levels``, default 1, 50, 200 and ``BENCH_TURNS``, default
500) fresh daphne processes are started (one; at the top level also two behind a fresh
redis-server, the clients split between them), warmed with one turn each, and that many users
open a websocket each (20 handshakes at a time), then all send one question together. Printed:

- added time to first token: client-observed (question sent -> first ``token`` frame) minus the
  model's scripted 1.0 s; p50 / p99. Target: p99 <= 100 ms on one process.
- added inter-token delay: for consecutive ``token`` frames of a turn, the observed gap minus the
  model's scheduled gap between the oldest deltas the two frames hold (so a delta held back to
  be merged with the next counts with its wait); p50 / p99.
- token lateness: how far each delta arrives behind its place in the model's stream, counted
  from the turn's first token; p50 / p99.
- message -> model request: measured inside the server (``bench._stream_load_asgi``): the chat
  frame received -> the provider's ``stream`` first called for it; p50 / p99.
- CPU seconds per turn of the server processes (and of PostgreSQL, redis-server and the bench's
  own clients, which share the 2 cores), and memory per turn: the servers' peak RSS during the
  level minus their RSS when the turns started, divided by the turns.
- errors (any ``error`` frame, refused socket, timeout) and lost turns: afterwards every turn must
  have its four rows in order (question, tool call, tool result, the answer equal to the streamed
  tokens) and no run may be left running.

A plot of the added latencies against concurrent turns goes to ``docs/benchmarks/stream_load.png``.

Run: ``.venv/bin/python -m bench.stream_load [--turns 500] [--levels 1,50,200] [--no-plot]`` (or
``BENCH_TURNS=100 python -m bench stream_load``; part of ``make bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench._stream_load_measure import Level, Pace, Sampler, Turn, add_latencies, paced_turn, postmaster_pid
from bench._stream_load_report import PlotRow, plot, report
from bench.load import (
    HANDSHAKES,
    ClientResult,
    Gate,
    _arrange,
    _check_database,
    _cleanup,
    _setup_django,
    gated_connect,
)
from bench.support import ROOT, ServerProcess, redis_server, start_daphne, wait_ready

# A turn with no frame for this long is an error of the run (a guard against hanging, not a figure).
FRAME_TIMEOUT = 120.0


async def _turn(
    url: str, session: str, project_id: str, agent_id: str, question: str, turn: Turn, gate: Gate | None
) -> None:
    result = turn.result
    try:
        ws = await gated_connect(url, session, gate)
        async with ws:
            await paced_turn(ws, question, project_id, agent_id, turn, frame_timeout=FRAME_TIMEOUT)
            result.done.append(time.perf_counter() - turn.sent)
    except Exception as exc:  # a refused or broken connection is an error of the run, not a crash
        result.errors.append(f"{type(exc).__name__}: {exc}")


def _probe_first_requests(server: ServerProcess) -> list[float]:
    """The server's own message -> first model request delays (seconds) since the last probe."""
    import httpx

    pairs = httpx.get(f"{server.http}/bench/first-request/", timeout=30).json()
    return [first - received for received, first in pairs.values()]


@contextmanager
def _servers(
    processes: int, env: dict[str, str], workdir: Path
) -> Iterator[tuple[list[ServerProcess], int | None]]:
    """Start ``processes`` daphne processes (behind a fresh redis-server when more than one)."""
    with ExitStack() as stack:
        redis_pid: int | None = None
        if processes > 1:
            url, redis_pid = stack.enter_context(redis_server())
            env = {**env, "REDIS_URL": url}
        servers: list[ServerProcess] = []
        try:
            for n in range(processes):
                servers.append(
                    start_daphne(
                        f"daphne-{n}",
                        env=env,
                        log=workdir / f"daphne-{processes}-{n}.log",
                        application="bench._stream_load_asgi:application",
                        quiet=True,
                    )
                )
            for server in servers:
                wait_ready(server)
            yield servers, redis_pid
        finally:
            for server in servers:
                server.stop(30)


async def _level(
    servers: list[ServerProcess],
    sessions: list[str],
    project_id: str,
    agent_id: str,
    level: Level,
    pace: Pace,
    others: dict[str, list[int]],
    tag: str,
) -> list[ClientResult]:
    # One turn per process first, not measured: its first turn imports and connects what it needs.
    for n, server in enumerate(servers):
        warm = Turn()
        await _turn(server.ws, sessions[n], project_id, agent_id, f"{tag} warm-up {n}", warm, None)
        if warm.result.errors:
            raise RuntimeError(f"the warm-up turn failed: {warm.result.errors}")
    for server in servers:
        _probe_first_requests(server)
    turns = [Turn() for _ in range(level.turns)]
    gate = Gate(handshakes=asyncio.Semaphore(HANDSHAKES), expected=level.turns)
    tasks = [
        asyncio.create_task(
            _turn(
                servers[i % len(servers)].ws,
                sessions[i],
                project_id,
                agent_id,
                f"{tag} question {i}: what is Paris connected to?",
                turn,
                gate,
            )
        )
        for i, turn in enumerate(turns)
    ]
    await gate.go.wait()
    sampler = Sampler([s.process.pid for s in servers], others)
    sampler.start()
    started = time.perf_counter()
    await asyncio.gather(*tasks)
    level.elapsed = time.perf_counter() - started
    sampler.stop(level)
    for server in servers:
        level.first_request += _probe_first_requests(server)
    for turn in turns:
        add_latencies(turn, pace, level)
        level.errors += turn.result.errors
    return [t.result for t in turns]


def _run_level(
    level: Level, pace: Pace, users: Any, sessions: list[str], project: Any, agent: Any, timeout: float
) -> None:
    env = {
        **os.environ,
        **pace.env(),
        "DJANGO_SETTINGS_MODULE": "bench._stream_load_server",
        "BENCH_STREAM_MODEL": "bench-paced",
        "KGCHAT_LOG_LEVEL": "WARNING",
    }
    postmaster = postmaster_pid()
    tag = f"L{level.turns}x{level.processes}-{time.monotonic_ns()}"
    logs = ROOT / ".data" / "bench" / "stream_load" / tag  # kept when the level had errors
    logs.mkdir(parents=True, exist_ok=True)
    try:
        _run_servers(level, pace, sessions, project, agent, timeout, env, postmaster, tag, logs)
    finally:
        if level.errors or level.complete != level.turns:
            level.problems.append(f"server logs kept in {logs}")
        else:
            shutil.rmtree(logs, ignore_errors=True)


def _run_servers(
    level: Level,
    pace: Pace,
    sessions: list[str],
    project: Any,
    agent: Any,
    timeout: float,
    env: dict[str, str],
    postmaster: int | None,
    tag: str,
    logs: Path,
) -> None:
    with _servers(level.processes, env, logs) as (servers, redis):
        others = {"postgres": [postmaster] if postmaster else []}
        if redis is not None:
            others["redis"] = [redis]
        try:
            results = asyncio.run(
                asyncio.wait_for(
                    _level(servers, sessions, str(project.id), str(agent.id), level, pace, others, tag),
                    timeout,
                )
            )
        except TimeoutError:
            level.errors.append(f"the level did not finish within {timeout:.0f} s")
            for server in servers:
                level.problems.append(f"{server.name} log: " + " | ".join(server.tail(5).splitlines()))
            return
        level.complete, level.problems = _check_database(results, 1)
        if level.errors:
            for server in servers:
                level.problems.append(f"{server.name} log: " + " | ".join(server.tail(5).splitlines()))


def _levels(turns: int, spec: str | None) -> list[int]:
    if spec:
        wanted = [int(n) for n in spec.split(",") if n.strip()]
    else:
        wanted = [n for n in (1, 50, 200) if n < turns] + [turns]
    return sorted(set(wanted))


def main(argv: list[str] | None = None) -> int:
    """Run every level; print the table; return 1 on any error or lost turn."""
    parser = argparse.ArgumentParser(prog="python -m bench.stream_load", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--turns",
        type=int,
        default=int(os.environ.get("BENCH_TURNS") or 500),
        help="top level (BENCH_TURNS, 500)",
    )
    parser.add_argument("--levels", help="comma-separated levels on one process (default 1,50,200,<turns>)")
    parser.add_argument(
        "--two-processes",
        type=int,
        default=None,
        help="turns on two processes behind redis (default: --turns; 0: skip)",
    )
    parser.add_argument(
        "--first-token", type=float, default=0.5, help="the model's first-token delay, s (0.5)"
    )
    parser.add_argument("--rate", type=float, default=50.0, help="the model's tokens per second (50)")
    parser.add_argument("--tokens", type=int, default=200, help="text deltas per answer (200)")
    parser.add_argument(
        "--timeout", type=float, default=600, help="give up on a level after this many seconds"
    )
    parser.add_argument("--no-plot", action="store_true", help="do not write the plot")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    pace = Pace(first_token=args.first_token, rate=args.rate, tokens=args.tokens)
    single = _levels(args.turns, args.levels)
    two = args.turns if args.two_processes is None else args.two_processes
    plan = [Level(turns=n, processes=1) for n in single] + ([Level(turns=two, processes=2)] if two else [])
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    _setup_django()
    project, agent, users, sessions = _arrange(max(lv.turns for lv in plan) + 2)
    try:
        for level in plan:
            _run_level(level, pace, users, sessions, project, agent, args.timeout)
            print(f"  level {level.turns} x {level.processes} process(es): {level.elapsed:.1f} s", flush=True)
    finally:
        _cleanup(project, users, sessions)
    ok = report(plan, pace, load)
    if not args.no_plot:
        plot([PlotRow.of(lv) for lv in plan if lv.ok])
    return 0 if ok else 1


def run() -> None:
    """Entry point of ``python -m bench`` (``make bench``): levels 1, 50, 200, BENCH_TURNS (500)."""
    if main([]) != 0:
        raise SystemExit("bench.stream_load: errors or lost turns (see above)")


if __name__ == "__main__":
    raise SystemExit(main())

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
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
from bench.load import _percentile as pct
from bench.support import ROOT, ServerProcess, redis_server, start_daphne, wait_ready, ws_turn

TARGET_TTFT_P99_MS = 100.0
PLOT = ROOT / "docs" / "benchmarks" / "stream_load.png"
DELTA = re.compile(r"t(\d+) ")
SAMPLE_SECONDS = 0.05
# A turn with no frame for this long is an error of the run (a guard against hanging, not a figure).
FRAME_TIMEOUT = 120.0


@dataclass
class Pace:
    """The model's schedule, as the servers are told it."""

    first_token: float
    rate: float
    tokens: int

    @property
    def before_first_token(self) -> float:
        """Seconds the model alone takes from the question to the first text token (two requests)."""
        return 2 * self.first_token

    def env(self) -> dict[str, str]:
        return {
            "BENCH_FIRST_TOKEN_S": str(self.first_token),
            "BENCH_TOKENS_PER_S": str(self.rate),
            "BENCH_TOKENS": str(self.tokens),
        }


@dataclass
class Turn:
    """One client's turn: when the question left and when each token frame arrived, with its deltas."""

    sent: float = 0.0
    frames: list[tuple[float, list[int]]] = field(default_factory=list)
    result: ClientResult = field(default_factory=ClientResult)

    def record(self, arrived: float, text: str) -> None:
        """A token frame's arrival and the model's delta numbers it carries."""
        self.frames.append((arrived, [int(n) for n in DELTA.findall(text)]))


@dataclass
class Level:
    """The figures of one level: N turns at once on P processes."""

    turns: int
    processes: int
    elapsed: float = 0.0
    added_ttft: list[float] = field(default_factory=list)
    added_gap: list[float] = field(default_factory=list)
    lateness: list[float] = field(default_factory=list)
    first_request: list[float] = field(default_factory=list)
    server_cpu: float = 0.0
    db_cpu: float | None = None
    redis_cpu: float | None = None
    client_cpu: float = 0.0
    rss_growth: float = 0.0
    errors: list[str] = field(default_factory=list)
    complete: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and self.complete == self.turns


async def paced_turn(
    ws: Any, question: str, project_id: str, agent_id: str, turn: Turn, *, frame_timeout: float
) -> None:
    """Ask ``question`` on an open kgchat websocket: the time it left and each token frame's deltas
    go into ``turn``, the question and the streamed answer into ``turn.result``."""
    request = {
        "type": "chat.message",
        "message": question,
        "projectId": project_id,
        "agentDefinitionId": agent_id,
    }
    turn.sent = time.perf_counter()
    answer = await ws_turn(
        ws,
        request,
        turn.result,
        frame_timeout=frame_timeout,
        on_token=turn.record,
    )
    turn.result.questions.append(question)
    turn.result.answers.append(answer)


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


def _latencies(turn: Turn, pace: Pace, level: Level) -> None:
    """Add one turn's added first-token delay, added gaps and token lateness (seconds) to ``level``."""
    frames = [(t, deltas) for t, deltas in turn.frames if deltas]
    if not frames:
        return
    first_at = frames[0][0]
    level.added_ttft.append(first_at - turn.sent - pace.before_first_token)
    gap = 1 / pace.rate
    previous: tuple[float, int] | None = None
    for arrived, deltas in frames:
        oldest = min(deltas)
        if previous is not None:
            level.added_gap.append((arrived - previous[0]) - (oldest - previous[1]) * gap)
        previous = (arrived, oldest)
        level.lateness.extend((arrived - first_at) - n * gap for n in deltas if n > 0)


class Sampler:
    """CPU seconds and RSS of the server processes (and the database's, redis') while a level runs."""

    def __init__(self, servers: list[int], others: dict[str, list[int]]) -> None:
        import psutil

        self.psutil = psutil
        self.servers = [psutil.Process(pid) for pid in servers]
        self.others = others
        self.me = psutil.Process()
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _cpu(self, processes: list[Any]) -> float:
        total = 0.0
        for p in processes:
            try:
                times = p.cpu_times()
            except self.psutil.Error:
                continue
            total += times.user + times.system
        return total

    def _rss(self) -> int:
        total = 0
        for p in self.servers:
            try:
                total += p.memory_info().rss
            except self.psutil.Error:
                pass
        return total

    def _group(self, name: str) -> list[Any]:
        """The processes of ``name`` now: each listed pid and its children (PostgreSQL's backends)."""
        found = []
        for pid in self.others.get(name, []):
            try:
                parent = self.psutil.Process(pid)
                found += [parent, *parent.children(recursive=True)]
            except self.psutil.Error:
                continue
        return found

    def start(self) -> None:
        self.rss0 = self._rss()
        self.peak = self.rss0
        self.cpu0 = self._cpu(self.servers)
        self.me0 = self._cpu([self.me])
        self.other0 = {name: self._cpu(self._group(name)) for name in self.others}
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self.peak = max(self.peak, self._rss())

    def stop(self, level: Level) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())
        level.server_cpu = self._cpu(self.servers) - self.cpu0
        level.client_cpu = self._cpu([self.me]) - self.me0
        level.rss_growth = self.peak - self.rss0
        for name in self.others:
            used = self._cpu(self._group(name)) - self.other0[name]
            if name == "postgres":
                level.db_cpu = used
            else:
                level.redis_cpu = used


def _postmaster_pid() -> int | None:
    """The embedded PostgreSQL's postmaster (None with ``DATABASE_URL``: its CPU is not counted)."""
    if os.environ.get("DATABASE_URL"):
        return None
    from apps.core import embedded_db

    pid_file = embedded_db.PGDATA / "postmaster.pid"
    try:
        return int(pid_file.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


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
        _latencies(turn, pace, level)
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
    postmaster = _postmaster_pid()
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


def _ms(values: list[float], q: float) -> str:
    return f"{pct(values, q) * 1000:.1f}"


def _print(levels: list[Level], pace: Pace, load: str) -> bool:
    print(f"machine: {os.cpu_count()} cores; load average before the run: {load}")
    print(
        f"model: scripted, {pace.first_token:.2f} s to the first item of every request, then "
        f"{pace.rate:g} tokens/s; a turn = 1 tool call + {pace.tokens} text deltas "
        f"(the model alone: first text token {pace.before_first_token:.2f} s after the question)"
    )
    print("added = client-observed minus the model's schedule; ms, p50 / p99")
    header = (
        f"{'turns':>6} {'procs':>5} {'1st token':>15} {'inter-token':>13} {'lateness':>13} "
        f"{'msg->model':>13} {'CPU s/turn':>10} {'db s/turn':>9} {'client s/turn':>13} "
        f"{'KiB/turn':>8} {'errors':>6} {'lost':>5}"
    )
    print(header)
    for lv in levels:
        db = f"{lv.db_cpu / lv.turns:.3f}" if lv.db_cpu is not None else "-"
        print(
            f"{lv.turns:>6} {lv.processes:>5} "
            f"{_ms(lv.added_ttft, 0.5):>7}/{_ms(lv.added_ttft, 0.99):>7} "
            f"{_ms(lv.added_gap, 0.5):>6}/{_ms(lv.added_gap, 0.99):>6} "
            f"{_ms(lv.lateness, 0.5):>6}/{_ms(lv.lateness, 0.99):>6} "
            f"{_ms(lv.first_request, 0.5):>6}/{_ms(lv.first_request, 0.99):>6} "
            f"{lv.server_cpu / lv.turns:>10.3f} {db:>9} {lv.client_cpu / lv.turns:>13.3f} "
            f"{lv.rss_growth / 1024 / lv.turns:>8.0f} {len(lv.errors):>6} {lv.turns - lv.complete:>5}"
        )
        if lv.redis_cpu is not None:
            print(f"{'':>13}redis-server CPU {lv.redis_cpu / lv.turns * 1000:.2f} ms/turn")
        for error in sorted(set(lv.errors))[:5]:
            print(f"{'':>13}{lv.errors.count(error)} x {error}")
        for problem in lv.problems[:5]:
            print(f"{'':>13}{problem}")
    ok = all(lv.ok for lv in levels)
    single = [lv for lv in levels if lv.processes == 1]
    if single:
        top = max(single, key=lambda lv: lv.turns)
        p99 = pct(top.added_ttft, 0.99) * 1000
        verdict = "met" if p99 <= TARGET_TTFT_P99_MS else "NOT met"
        print(
            f"target: added first-token delay p99 <= {TARGET_TTFT_P99_MS:.0f} ms on one process at "
            f"{top.turns} turns: {p99:.1f} ms, {verdict}"
        )
    print(f"errors and lost turns: {'none' if ok else 'SOME (see above)'}")
    return ok


@dataclass
class PlotRow:
    """What the plot shows of a level: added first-token and inter-token delay, ms."""

    turns: int
    processes: int
    ttft_p50: float
    ttft_p99: float
    gap_p50: float
    gap_p99: float

    @classmethod
    def of(cls, lv: Level) -> PlotRow:
        return cls(
            lv.turns,
            lv.processes,
            *(pct(getattr(lv, name), q) * 1000 for name in ("added_ttft", "added_gap") for q in (0.5, 0.99)),
        )


def _plot(rows: list[PlotRow], path: Path = PLOT) -> None:
    """Added latency against concurrent turns (levels with errors or lost turns are left out)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    single = sorted((r for r in rows if r.processes == 1), key=lambda r: r.turns)
    if not single:
        return
    xs = [r.turns for r in single]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(xs, [r.ttft_p50 for r in single], "o-", label="added first token, p50")
    ax.plot(xs, [r.ttft_p99 for r in single], "o--", label="added first token, p99")
    ax.plot(xs, [r.gap_p50 for r in single], "s-", label="added inter-token, p50")
    ax.plot(xs, [r.gap_p99 for r in single], "s--", label="added inter-token, p99")
    for r in rows:
        if r.processes > 1:
            ax.plot(
                [r.turns], [r.ttft_p99], "k^", label=f"added first token p99, {r.processes} processes + redis"
            )
    ax.axhline(TARGET_TTFT_P99_MS, color="grey", linestyle=":", label="target: first token p99, one process")
    ax.set_xlabel("concurrent agent turns (websockets)")
    ax.set_ylabel("added latency, ms")
    ax.set_yscale("symlog", linthresh=10)
    ax.set_ylim(bottom=0)
    ax.set_title("kgchat's added latency, scripted model at 50 tokens/s after 0.5 s")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    print(f"plot: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


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
    ok = _print(plan, pace, load)
    if not args.no_plot:
        _plot([PlotRow.of(lv) for lv in plan if lv.ok])
    return 0 if ok else 1


def run() -> None:
    """Entry point of ``python -m bench`` (``make bench``): levels 1, 50, 200, BENCH_TURNS (500)."""
    if main([]) != 0:
        raise SystemExit("bench.stream_load: errors or lost turns (see above)")


if __name__ == "__main__":
    raise SystemExit(main())

"""Capacity at a latency promise (issue #28 item 1): the highest rate of arriving turns a server
sustains while keeping what it adds to a streaming model small.

Open loop: turns arrive as a Poisson process at a given rate (``arrivals``: exponential gaps, a
fixed seed) for ``--duration`` seconds, whatever the server does with the earlier ones. Each turn
is a new user question to graph-query-agent on the paced scripted model of ``bench.stream_load``
(``bench._stream_load_server``): every model request answers its first item after 0.5 s, then 50
items a second; a turn is one ``get_entity_edges`` call, then ``--tokens`` (300) one-word deltas.
The model alone puts the first text token 1.0 s after the question (two requests).

Servers, each started fresh for the run (ports from ``BENCH_PORTS`` when set):

- ``kgchat x1``: one daphne process; a turn opens its websocket when it arrives, sends the
  question, reads to ``done``.
- ``kgchat x2``: two daphne processes behind a fresh redis-server, arrivals alternating.
- ``adk``: ADK's ``adk api_server`` (in-memory sessions) serving the same agent on the same model
  (``bench._vs_adk_agent``); a turn creates its session, then POSTs ``/run_sse`` and reads to the end.

``--trace`` (kgchat only) also shows where the slowest turns' first token went: each server notes
when a question arrived, each model request, the model's first text delta and the first token
frame sent (``bench._stream_load_asgi``, ``BENCH_TRACE``), and the garbage collector's pauses;
after each rate the bench lines these up with its clients' times (one monotonic clock) and prints
the median of each step and the slowest turns with the collections that overlapped them.

Per rate: kgchat's (or ADK's) added time to first token (client-seen minus the model's 1.0 s)
and added inter-token delay (``bench.stream_load``'s: the observed gap minus the model's
scheduled gap between the oldest deltas two frames hold), p50 / p99; errors; lost turns (kgchat:
every turn's rows in PostgreSQL, the answer equal to the streamed text; ADK: the streamed text
complete); the server processes' CPU per turn. A rate is sustained when added first-token p99 <=
100 ms, added inter-token p99 <= 50 ms, no error and no lost turn. Each server's rates are tried
in ascending order up to the first that is not sustained, then once more halfway between the last
sustained rate and that one. Also printed: the CPU of admitting one message (in this process,
``bench.stream_cpu``'s measure).

The points (rate -> percentiles) go to ``.data/bench/capacity-<time>.json``, and a plot of added
first-token p99 against arrival rate to ``--plot`` (default ``.data/bench/capacity.png``).

``make bench`` runs a short version (``BENCH_CAPACITY_DURATION`` 4 s at 3 turns/s: ~110 s for the
three servers, most of it starting them and their warm-up turns). The full
run: ``BENCH_CAPACITY_DURATION=120 BENCH_CAPACITY_RATES=1,2,3,4,6,8,10,12,16 python -m bench capacity``,
or ``.venv/bin/python -m bench.capacity --duration 120 --rates 1,2,4,8 [--servers kgchat1,kgchat2,adk]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench._capacity_points import LABELS, SERVERS, Point, report
from bench._capacity_points import plot as plot_points
from bench._capacity_servers import FRAME_TIMEOUT, Target, target_started, warm
from bench._capacity_trace import print_trace
from bench._stream_load_measure import Level, Pace, Sampler, Turn, add_latencies
from bench.load import _arrange, _check_database, _cleanup, _setup_django
from bench.load import _percentile as pct
from bench.support import ROOT

SEED = 28
OUT = ROOT / ".data" / "bench"


def arrivals(rate: float, duration: float, seed: int = SEED) -> list[float]:
    """Arrival times (seconds from the start) of a Poisson process of ``rate`` per second over
    ``duration`` seconds: exponential gaps of mean 1 / ``rate`` from a generator seeded ``seed``."""
    rng = random.Random(seed)
    times: list[float] = []
    t = rng.expovariate(rate)
    while t < duration:
        times.append(t)
        t += rng.expovariate(rate)
    return times


async def _rate(
    target: Target, rate: float, duration: float, pace: Pace, tag: str, trace: bool = False
) -> tuple[Point, list[Turn]]:
    import httpx

    point = Point(target.name, rate, duration, load=", ".join(f"{x:.1f}" for x in os.getloadavg()))
    times = arrivals(rate, duration)
    turns = [Turn() for _ in times]
    questions = [f"{tag} r{rate:g} question {n}: what is Paris connected to?" for n in range(len(times))]
    limits = httpx.Limits(max_connections=2000, max_keepalive_connections=200)
    async with httpx.AsyncClient(limits=limits, timeout=FRAME_TIMEOUT) as http:
        if trace and target.name != "adk":
            for server in target.servers:  # what the start and the warm-up turn left: not this rate's
                await http.get(f"{server.http}/bench/trace/")
        sampler = Sampler([s.process.pid for s in target.servers], target.others)
        sampler.start()
        started = time.perf_counter()
        tasks = []
        for n, (at, turn) in enumerate(zip(times, turns, strict=True)):
            delay = started + at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(target.turn(n, questions[n], turn, http)))
        await asyncio.gather(*tasks)
        level = Level(turns=len(turns), processes=len(target.servers))
        sampler.stop(level)
        if trace and target.name != "adk":
            timelines: dict[str, Any] = {}
            pauses: list[list[float]] = []
            for server in target.servers:
                data = (await http.get(f"{server.http}/bench/trace/")).json()
                timelines.update(data["questions"])
                pauses += data["pauses"]
            print_trace(turns, questions, timelines, pauses, pace)
    point.turns = len(turns)
    point.cpu_per_turn = level.server_cpu / max(1, len(turns))
    for turn in turns:
        add_latencies(turn, pace, level)
    point.ttft_p50, point.ttft_p99 = (pct(level.added_ttft, q) * 1000 for q in (0.5, 0.99))
    point.gap_p50, point.gap_p99 = (pct(level.added_gap, q) * 1000 for q in (0.5, 0.99))
    errors = [e for t in turns for e in t.result.errors]
    point.errors = len(errors)
    point.error_samples = sorted(set(errors))[:3]
    return point, turns


def _lost(target: Target, turns: list[Turn], pace: Pace) -> int:
    """Turns without their whole answer: kgchat's checked in PostgreSQL, ADK's as streamed."""
    expected = "".join(f"t{i} " for i in range(pace.tokens))
    if target.name == "adk":
        return sum(1 for t in turns if not t.result.answers or t.result.answers[0] != expected)
    results = [t.result for t in turns]
    complete, _ = _check_database(results, 1)
    wrong = sum(1 for t in turns if t.result.answers and t.result.answers[0] != expected)
    return len(turns) - complete + wrong


def _search(
    target: Target,
    rates: list[float],
    duration: float,
    pace: Pace,
    refine: bool,
    every: bool = False,
    trace: bool = False,
) -> list[Point]:
    """Rates in ascending order up to the first not sustained, then halfway back once (``every``:
    all of them, for the curve, when even the lowest is not sustained on a busy machine)."""
    points: list[Point] = []

    def measure(rate: float) -> Point:
        claimed = claimed_turns(target.project_id)
        if claimed and target.name != "adk":
            # Turns of the project still running when a rate starts would run beside it unmeasured.
            raise RuntimeError(f"{claimed} turns of the bench's project are claimed before {rate}/s")
        tag = f"cap-{target.name}-{time.monotonic_ns()}"
        point, turns = asyncio.run(_rate(target, rate, duration, pace, tag, trace))
        point.lost = _lost(target, turns, pace)
        points.append(point)
        verdict = "sustained" if point.sustained else "NOT sustained"
        print(
            f"  {LABELS[target.name]:<28} {rate:>6g}/s  {point.turns:>5} turns  first token +{point.ttft_p50:.0f}/"
            f"+{point.ttft_p99:.0f} ms  inter-token +{point.gap_p50:.0f}/+{point.gap_p99:.0f} ms  "
            f"errors {point.errors}  lost {point.lost}  CPU {point.cpu_per_turn * 1000:.0f} ms/turn  "
            f"load {point.load}: {verdict}",
            flush=True,
        )
        for sample in point.error_samples:
            print(f"      {sample}", flush=True)
        return point

    asyncio.run(warm(target))
    last_ok: float | None = None
    for rate in rates:
        if not measure(rate).sustained:
            if every:
                continue
            if refine and last_ok is not None and rate - last_ok > 0.5:
                middle = round((last_ok + rate) / 2, 1)
                if measure(middle).sustained:
                    last_ok = middle
            break
        last_ok = rate
    return points


def admission_cpu(world: tuple[Any, Any, list[Any], list[str]], count: int = 200) -> float:
    """CPU seconds of admitting one message in this process (``stream_cpu --admissions``' measure)."""
    from django.test.utils import override_settings

    from apps.chat.turns import admission
    from apps.projects.selectors import principal_from_user

    project, agent, users, _ = world
    principal = principal_from_user(users[0])

    def admit(n: int) -> None:
        admission.turn_admit(
            principal=principal,
            message=f"capacity admission {n}-{time.monotonic_ns()}",
            project_id=str(project.id),
            conversation_id=None,
            agent_definition_id=str(agent.id),
        )

    try:
        with override_settings(KGCHAT_TURNS_PER_MINUTE=1_000_000):
            for n in range(5):
                admit(n)
            cpu0 = time.thread_time()
            for n in range(count):
                admit(n)
            return (time.thread_time() - cpu0) / count
    finally:
        admitted_forget(project)


def admitted_forget(project: Any) -> None:
    """Delete the turns ``admission_cpu`` admitted (never run). Left claimed, their leases lapse and
    the next kgchat server takes them over and runs them beside the measured turns: until session
    20 the first server measured (one process) ran ~205 such turns during its first rates."""
    from apps.agents.models import AgentRun
    from apps.chat.models import Conversation

    AgentRun.objects.filter(project=project).delete()
    Conversation.objects.filter(project=project).delete()


def claimed_turns(project_id: str) -> int:
    """How many of the project's conversations hold a turn's claim (none before a rate starts)."""
    from apps.chat.models import Conversation

    return Conversation.objects.filter(project_id=project_id, active_turn_id__isnull=False).count()


def write(points: list[Point], admission: float, pace: Pace, plot: Path | None) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"capacity-{time.strftime('%Y%m%d-%H%M%S')}.json"
    data = {
        "pace": asdict(pace),
        "seed": SEED,
        "admission_cpu_ms": admission * 1000,
        "points": [asdict(p) | {"sustained": p.sustained} for p in points],
    }
    path.write_text(json.dumps(data, indent=1))
    print(f"points: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    if plot is not None and points:
        plot_points(points, plot)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--duration",
        type=float,
        default=float(os.environ.get("BENCH_CAPACITY_DURATION") or 4),
        help="seconds of arrivals per rate (BENCH_CAPACITY_DURATION, 4; the issue's run: 120)",
    )
    parser.add_argument(
        "--rates",
        default=os.environ.get("BENCH_CAPACITY_RATES") or "3",
        help="arrival rates to try, ascending (BENCH_CAPACITY_RATES, 3)",
    )
    parser.add_argument(
        "--servers",
        default=os.environ.get("BENCH_CAPACITY_SERVERS") or ",".join(SERVERS),
        help="which of kgchat1, kgchat2, adk (all)",
    )
    parser.add_argument("--tokens", type=int, default=300, help="text deltas per answer (300)")
    parser.add_argument(
        "--first-token", type=float, default=0.5, help="the model's first-item delay, s (0.5)"
    )
    parser.add_argument("--rate", type=float, default=50.0, help="the model's tokens per second (50)")
    parser.add_argument(
        "--refine",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a halfway rate after the first failure (default: when --duration >= 30)",
    )
    parser.add_argument(
        "--every-rate", action="store_true", help="measure every rate, not only up to the first failure"
    )
    parser.add_argument(
        "--trace", action="store_true", help="where the slowest turns' first token went (kgchat servers)"
    )
    parser.add_argument("--plot", type=Path, default=OUT / "capacity.png", help="where the PNG goes")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    pace = Pace(first_token=args.first_token, rate=args.rate, tokens=args.tokens)
    rates = sorted({float(r) for r in args.rates.split(",") if r.strip()})
    servers = [s for s in args.servers.split(",") if s.strip()]
    unknown = set(servers) - set(SERVERS)
    if unknown:
        parser.error(f"unknown servers: {', '.join(sorted(unknown))}")
    _setup_django()
    world = _arrange(20)
    points: list[Point] = []
    try:
        admission = admission_cpu(world)
        for name in servers:
            with (
                tempfile.TemporaryDirectory(prefix=f"capacity-{name}-") as logs,
                target_started(name, pace, world, Path(logs), args.trace) as target,
            ):
                refine = args.refine if args.refine is not None else args.duration >= 30
                points += _search(
                    target, rates, args.duration, pace, refine=refine, every=args.every_rate, trace=args.trace
                )
    finally:
        _cleanup(world[0], world[2], world[3])
    report(points, servers, admission, pace, SEED)
    write(points, admission, pace, args.plot)
    return 0


def run() -> None:
    """Entry point of ``python -m bench`` (``make bench``): the short run (env vars: the full one)."""
    main([])


if __name__ == "__main__":
    raise SystemExit(main())

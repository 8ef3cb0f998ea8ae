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
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.load import ORIGIN, _arrange, _check_database, _cleanup, _setup_django
from bench.load import _percentile as pct
from bench.stream_load import Pace, Sampler, Turn, _latencies, _postmaster_pid, _servers, paced_turn
from bench.support import ROOT, ServerProcess, wait_ready

TARGET_TTFT_P99_MS = 100.0
TARGET_GAP_P99_MS = 50.0
SEED = 28
SERVERS = ("kgchat1", "kgchat2", "adk")
LABELS = {"kgchat1": "kgchat, 1 process", "kgchat2": "kgchat, 2 processes + redis", "adk": "ADK api_server"}
# A turn with nothing for this long is an error of the run (a guard against hanging, not a figure).
FRAME_TIMEOUT = 60.0
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


@dataclass
class Point:
    """One server at one arrival rate."""

    server: str
    rate: float
    duration: float
    turns: int = 0
    ttft_p50: float = 0.0
    ttft_p99: float = 0.0
    gap_p50: float = 0.0
    gap_p99: float = 0.0
    errors: int = 0
    lost: int = 0
    cpu_per_turn: float = 0.0
    load: str = ""
    error_samples: list[str] = field(default_factory=list)

    @property
    def sustained(self) -> bool:
        return (
            self.turns > 0
            and self.ttft_p99 <= TARGET_TTFT_P99_MS
            and self.gap_p99 <= TARGET_GAP_P99_MS
            and self.errors == 0
            and self.lost == 0
        )


# --- one turn -------------------------------------------------------------------------------------


async def _kgchat_turn(
    url: str, session: str, project_id: str, agent_id: str, question: str, turn: Turn
) -> None:
    from websockets.asyncio.client import connect

    result = turn.result
    try:
        async with connect(
            url,
            origin=ORIGIN,  # type: ignore[arg-type]
            additional_headers={"Cookie": f"sessionid={session}"},
            open_timeout=FRAME_TIMEOUT,
            max_size=None,
        ) as ws:
            await paced_turn(ws, question, project_id, agent_id, turn, frame_timeout=FRAME_TIMEOUT)
    except Exception as exc:  # a refused or broken connection is an error of the run, not a crash
        result.errors.append(f"{type(exc).__name__}: {exc}")


async def _adk_turn(http: Any, base: str, question: str, turn: Turn) -> None:
    from bench._vs_adk_clients import APP

    result = turn.result
    try:
        created = await http.post(f"{base}/apps/{APP}/users/bench/sessions", json={})
        created.raise_for_status()
        body = {
            "app_name": APP,
            "user_id": "bench",
            "session_id": created.json()["id"],
            "new_message": {"role": "user", "parts": [{"text": question}]},
            "streaming": True,
        }
        parts: list[str] = []
        turn.sent = time.perf_counter()
        async with http.stream("POST", f"{base}/run_sse", json=body) as response:
            if response.status_code != 200:
                await response.aread()
                raise RuntimeError(f"HTTP {response.status_code}: {response.text[:200]}")
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                arrived = time.perf_counter()
                frame = json.loads(line[5:])
                if frame.get("error") or frame.get("errorCode") or frame.get("error_code"):
                    result.errors.append(str(frame)[:200])
                if not frame.get("partial"):
                    continue  # the final event repeats the whole text
                content = frame.get("content") or {}
                text = "".join(p.get("text", "") for p in content.get("parts") or [] if not p.get("thought"))
                if text:
                    parts.append(text)
                    turn.record(arrived, text)
        result.questions.append(question)
        result.answers.append("".join(parts))
    except Exception as exc:
        result.errors.append(f"{type(exc).__name__}: {exc}")


# --- one rate -------------------------------------------------------------------------------------


@dataclass
class Target:
    """The servers of one kind, started, and how to send them a turn."""

    name: str
    servers: list[ServerProcess]
    others: dict[str, list[int]]
    sessions: list[str]
    project_id: str
    agent_id: str

    async def turn(self, n: int, question: str, turn: Turn, http: Any) -> None:
        server = self.servers[n % len(self.servers)]
        if self.name == "adk":
            await _adk_turn(http, server.http, question, turn)
        else:
            session = self.sessions[n % len(self.sessions)]
            await _kgchat_turn(server.ws, session, self.project_id, self.agent_id, question, turn)


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
        holder = _Level()
        sampler.stop(holder)  # type: ignore[arg-type]
        if trace and target.name != "adk":
            timelines: dict[str, Any] = {}
            pauses: list[list[float]] = []
            for server in target.servers:
                data = (await http.get(f"{server.http}/bench/trace/")).json()
                timelines.update(data["questions"])
                pauses += data["pauses"]
            print_trace(turns, questions, timelines, pauses, pace)
    point.turns = len(turns)
    point.cpu_per_turn = holder.server_cpu / max(1, len(turns))
    level = _Level()
    for turn in turns:
        _latencies(turn, pace, level)  # type: ignore[arg-type]
    point.ttft_p50, point.ttft_p99 = (pct(level.added_ttft, q) * 1000 for q in (0.5, 0.99))
    point.gap_p50, point.gap_p99 = (pct(level.added_gap, q) * 1000 for q in (0.5, 0.99))
    errors = [e for t in turns for e in t.result.errors]
    point.errors = len(errors)
    point.error_samples = sorted(set(errors))[:3]
    return point, turns


@dataclass
class _Level:
    """What ``stream_load``'s ``Sampler`` and ``_latencies`` fill in."""

    added_ttft: list[float] = field(default_factory=list)
    added_gap: list[float] = field(default_factory=list)
    lateness: list[float] = field(default_factory=list)
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    rss_growth: float = 0.0
    db_cpu: float | None = None
    redis_cpu: float | None = None


def _lost(target: Target, turns: list[Turn], pace: Pace) -> int:
    """Turns without their whole answer: kgchat's checked in PostgreSQL, ADK's as streamed."""
    expected = "".join(f"t{i} " for i in range(pace.tokens))
    if target.name == "adk":
        return sum(1 for t in turns if not t.result.answers or t.result.answers[0] != expected)
    results = [t.result for t in turns]
    complete, _ = _check_database(results, 1)
    wrong = sum(1 for t in turns if t.result.answers and t.result.answers[0] != expected)
    return len(turns) - complete + wrong


# --- where the first token's time went (--trace) -------------------------------------------------

STEPS = (
    ("to server", "the question's frame from the client to the application"),
    ("to model", "admission, the run, ADK: to the model's first request"),
    ("tool", "the tool call, its frames and events, to the second request (less the model's 0.5 s)"),
    ("model", "the second request to its first text delta (less the model's 0.5 s): the loop's lateness"),
    ("to socket", "the delta to its token frame handed to the socket"),
    ("to client", "the frame from the socket to the client"),
)


def trace_steps(turn: Turn, timeline: dict[str, Any], pace: Pace) -> list[float] | None:
    """One turn's added first-token time cut into ``STEPS`` (ms), or None when a mark is missing."""
    first = next((arrived for arrived, deltas in turn.frames if deltas), None)
    requests = timeline.get("requests") or []
    marks = [
        turn.sent,
        timeline.get("received"),
        *requests[:2],
        timeline.get("first_text"),
        timeline.get("first_sent"),
        first,
    ]
    if len(requests) < 2 or any(mark is None for mark in marks):
        return None
    sent, received, request1, request2, first_text, first_sent, seen = marks
    return [
        (received - sent) * 1000,
        (request1 - received) * 1000,
        (request2 - request1 - pace.first_token) * 1000,
        (first_text - request2 - pace.first_token) * 1000,
        (first_sent - first_text) * 1000,
        (seen - first_sent) * 1000,
    ]


def print_trace(
    turns: list[Turn], questions: list[str], timelines: dict[str, Any], pauses: list[list[float]], pace: Pace
) -> None:
    """The median of each step, the five slowest turns' steps and the collections overlapping them."""
    rows = []
    for turn, question in zip(turns, questions, strict=True):
        steps = trace_steps(turn, timelines.get(question) or {}, pace)
        if steps is not None:
            rows.append((turn.sent, sum(steps), steps))
    if not rows:
        print("      trace: no turn with every mark")
        return
    names = [name for name, _ in STEPS]
    medians = [pct([r[2][i] for r in rows], 0.5) for i in range(len(STEPS))]
    print(
        f"      trace, {len(rows)} turns, median ms: "
        + ", ".join(f"{n} {m:.1f}" for n, m in zip(names, medians, strict=True))
    )
    full = [p for p in pauses if p[2] == 2]
    if full:
        durations = sorted(p[1] * 1000 for p in full)
        print(
            f"      full collections: {len(full)}, {pct(durations, 0.5):.0f} ms median, {durations[-1]:.0f} ms longest "
            f"(younger ones: {len(pauses) - len(full)}, {sum(p[1] for p in pauses if p[2] != 2) * 1000:.0f} ms in all)"
        )
    for sent, total, steps in sorted(rows, key=lambda r: -r[1])[:5]:
        overlapping = [
            f"gen {int(p[2])} {p[1] * 1000:.0f} ms"
            for p in pauses
            if p[1] >= 0.005 and sent <= p[0] + p[1] and p[0] <= sent + total / 1000 + pace.before_first_token
        ]
        cut = ", ".join(f"{n} {v:.0f}" for n, v in zip(names, steps, strict=True))
        print(f"      slow turn +{total:.0f} ms: {cut}; collections: {', '.join(overlapping) or 'none'}")


# --- the servers ----------------------------------------------------------------------------------


def _env(pace: Pace, trace: bool = False) -> dict[str, str]:
    return {
        **os.environ,
        **pace.env(),
        "DJANGO_SETTINGS_MODULE": "bench._stream_load_server",
        "BENCH_STREAM_MODEL": "bench-paced",
        "KGCHAT_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
        "BENCH_TRACE": "1" if trace else "",
    }


@contextmanager
def _target(
    name: str, pace: Pace, world: tuple[Any, Any, list[Any], list[str]], logs: Path, trace: bool = False
) -> Iterator[Target]:
    project, agent, _, sessions = world
    postmaster = _postmaster_pid()
    others: dict[str, list[int]] = {"postgres": [postmaster] if postmaster else []}
    with ExitStack() as stack:
        if name == "adk":
            from bench.vs_adk_server import _start_adk

            adk = _start_adk(str(project.id), _env(pace), logs)
            stack.callback(adk.stop)
            wait_ready(adk)
            servers = [adk]
        else:
            servers, redis = stack.enter_context(
                _servers(2 if name == "kgchat2" else 1, _env(pace, trace), logs)
            )
            if redis is not None:
                others["redis"] = [redis]
        yield Target(name, servers, others, sessions, str(project.id), str(agent.id))


async def _warm(target: Target) -> None:
    """One turn on each server first, not measured: the first turn imports and connects what it needs."""
    import httpx

    async with httpx.AsyncClient(timeout=FRAME_TIMEOUT) as http:
        for n in range(len(target.servers)):
            turn = Turn()
            await target.turn(n, f"cap-warm-{time.monotonic_ns()} {n}", turn, http)
            if turn.result.errors:
                raise RuntimeError(f"the warm-up turn on {target.name} failed: {turn.result.errors}")


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

    asyncio.run(_warm(target))
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


def sustained(points: list[Point], server: str) -> float:
    """The highest rate sustained by ``server`` (0: none)."""
    return max((p.rate for p in points if p.server == server and p.sustained), default=0.0)


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


# --- report ---------------------------------------------------------------------------------------


def report(points: list[Point], servers: list[str], admission: float, pace: Pace) -> None:
    print(
        f"machine: {os.cpu_count()} cores; load average now: {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print(
        f"model: scripted, {pace.first_token:g} s to the first item of each request, {pace.rate:g} tokens/s, "
        f"1 tool call + {pace.tokens} deltas a turn; Poisson arrivals (seed {SEED})"
    )
    print(
        f"promise: added first token p99 <= {TARGET_TTFT_P99_MS:.0f} ms, added inter-token p99 <= "
        f"{TARGET_GAP_P99_MS:.0f} ms, 0 errors, 0 lost turns"
    )
    print(
        f"{'server':<28} {'rate/s':>7} {'turns':>6} {'1st token +ms p50/p99':>22} {'inter-token +ms':>16} "
        f"{'err':>4} {'lost':>5} {'CPU ms/turn':>11}  sustained"
    )
    for p in points:
        print(
            f"{LABELS[p.server]:<28} {p.rate:>7g} {p.turns:>6} {p.ttft_p50:>10.0f}/{p.ttft_p99:<11.0f} "
            f"{p.gap_p50:>7.0f}/{p.gap_p99:<8.0f} {p.errors:>4} {p.lost:>5} {p.cpu_per_turn * 1000:>11.0f}  "
            f"{'yes' if p.sustained else 'no'}"
        )
    print("highest sustained rate (turns/s):")
    for server in servers:
        print(f"  {LABELS[server]:<28} {sustained(points, server):g}")
    one, two, adk = (sustained(points, s) for s in SERVERS)
    if "kgchat1" in servers and "adk" in servers:
        ratio = one / adk if adk else float("inf") if one else 0.0
        print(f"  kgchat 1 process / ADK: {ratio:.2f}x (target >= 2x): {'met' if ratio >= 2 else 'NOT met'}")
    if "kgchat1" in servers and "kgchat2" in servers:
        ratio = two / one if one else float("inf") if two else 0.0
        print(
            f"  kgchat 2 processes / 1: {ratio:.2f}x (target >= 1.7x): {'met' if ratio >= 1.7 else 'NOT met'}"
        )
    print(
        f"CPU of admitting one message (this process, 200 in a row): {admission * 1000:.2f} ms (target <= 2 ms)"
    )


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
        _plot(points, plot)
    return path


def _plot(points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for server, style in zip(SERVERS, ("o-", "s-", "^-"), strict=True):
        mine = sorted((p for p in points if p.server == server), key=lambda p: p.rate)
        if mine:
            ax.plot([p.rate for p in mine], [p.ttft_p99 for p in mine], style, label=LABELS[server])
    ax.axhline(TARGET_TTFT_P99_MS, color="grey", linestyle=":", label="promise: 100 ms")
    ax.set_xlabel("arriving turns per second (Poisson)")
    ax.set_ylabel("added time to first token, p99, ms")
    ax.set_yscale("symlog", linthresh=100)
    ax.set_ylim(bottom=0, top=max([TARGET_TTFT_P99_MS, *(p.ttft_p99 for p in points)]) * 1.5)
    ax.set_title("Added first-token p99 against arrival rate (paced scripted model)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    print(f"plot: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


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
                _target(name, pace, world, Path(logs), args.trace) as target,
            ):
                refine = args.refine if args.refine is not None else args.duration >= 30
                points += _search(
                    target, rates, args.duration, pace, refine=refine, every=args.every_rate, trace=args.trace
                )
    finally:
        _cleanup(world[0], world[2], world[3])
    report(points, servers, admission, pace)
    write(points, admission, pace, args.plot)
    return 0


def run() -> None:
    """Entry point of ``python -m bench`` (``make bench``): the short run (env vars: the full one)."""
    main([])


if __name__ == "__main__":
    raise SystemExit(main())

"""What one level of ``bench.stream_load`` measures, and how (``bench.capacity`` measures its rates the same way).

- ``Pace``: the paced scripted model's schedule, as the servers are told it;
- ``Turn`` and ``paced_turn``: one client's question on a websocket, when it left and when each token
  frame arrived with the model's delta numbers it carries;
- ``add_latencies``: what the server added to the model's schedule (first token, gaps, lateness);
- ``Level``: the figures of one level; ``Sampler``: the server processes' (and PostgreSQL's, redis')
  CPU and memory while it runs.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bench.load import ClientResult
from bench.support import ws_turn

DELTA = re.compile(r"t(\d+) ")
SAMPLE_SECONDS = 0.05


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


def add_latencies(turn: Turn, pace: Pace, level: Level) -> None:
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


def postmaster_pid() -> int | None:
    """The embedded PostgreSQL's postmaster (None with ``DATABASE_URL``: its CPU is not counted)."""
    if os.environ.get("DATABASE_URL"):
        return None
    from apps.core import embedded_db

    pid_file = embedded_db.PGDATA / "postmaster.pid"
    try:
        return int(pid_file.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None

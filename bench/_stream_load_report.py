"""The table and the plot of ``bench.stream_load``'s levels: added latencies against the model's
schedule, CPU and memory per turn, errors and lost turns."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bench._stream_load_measure import Level, Pace
from bench.load import _percentile as pct
from bench.support import ROOT

TARGET_TTFT_P99_MS = 100.0
PLOT = ROOT / "docs" / "benchmarks" / "stream_load.png"


def _ms(values: list[float], q: float) -> str:
    return f"{pct(values, q) * 1000:.1f}"


def report(levels: list[Level], pace: Pace, load: str) -> bool:
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


def plot(rows: list[PlotRow], path: Path = PLOT) -> None:
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

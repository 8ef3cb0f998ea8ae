"""What ``bench.capacity`` measured: a server's figures at one rate (``Point``), the latency promise
that says whether the rate is sustained, and the points' report (the table, each server's highest
sustained rate, the plot of added first-token p99 against arrival rate)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from bench._stream_load_measure import Pace
from bench.support import ROOT

TARGET_TTFT_P99_MS = 100.0
TARGET_GAP_P99_MS = 50.0
SERVERS = ("kgchat1", "kgchat2", "adk")
LABELS = {"kgchat1": "kgchat, 1 process", "kgchat2": "kgchat, 2 processes + redis", "adk": "ADK api_server"}


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


def sustained(points: list[Point], server: str) -> float:
    """The highest rate sustained by ``server`` (0: none)."""
    return max((p.rate for p in points if p.server == server and p.sustained), default=0.0)


def report(points: list[Point], servers: list[str], admission: float, pace: Pace, seed: int) -> None:
    print(
        f"machine: {os.cpu_count()} cores; load average now: {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print(
        f"model: scripted, {pace.first_token:g} s to the first item of each request, {pace.rate:g} tokens/s, "
        f"1 tool call + {pace.tokens} deltas a turn; Poisson arrivals (seed {seed})"
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


def plot(points: list[Point], path: Path) -> None:
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

"""The report of ``bench.vs_adk_server``: the figures printed with their ratios and targets, and
the plot of per-turn latency against conversation length."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from bench._vs_adk_measure import Delivery, Latency, Memory

TAIL = 10  # the turns at the end of a long conversation that are measured at "length N"
TARGET_SHORT = 1.0
TARGET_LONG = 0.5


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _tail(per_conversation: list[list[float]]) -> list[float]:
    return [t for conv in per_conversation for t in conv[-TAIL:]]


LABELS = {"adk": "ADK api_server /run_sse", "ws": "kgchat websocket", "sse": "kgchat SSE"}


def report(lat: Latency, turns: int, streams: int, delivery: Delivery, memory: Memory, load: str) -> bool:
    print(f"machine: {os.cpu_count()} cores; load average before the run: {load}")
    print(
        "per-turn overhead, request sent -> last frame (instant scripted model: 1 tool call + 200 text deltas;"
        " ratio = kgchat / ADK)"
    )
    ok = True
    for length, samples, target in (
        (1, lat.short, TARGET_SHORT),
        (turns, {k: _tail(v) for k, v in lat.long.items()}, TARGET_LONG),
    ):
        label = f"length {length}" if length == 1 else f"length {length} (last {TAIL} turns)"
        print(f"  {label}: n={len(samples['adk'])} turns per server")
        adk50, adk95 = _pct(samples["adk"], 0.5), _pct(samples["adk"], 0.95)
        print(f"    {LABELS['adk']:<24} p50 {adk50 * 1000:7.1f} ms   p95 {adk95 * 1000:7.1f} ms")
        for kind in ("ws", "sse"):
            p50, p95 = _pct(samples[kind], 0.5), _pct(samples[kind], 0.95)
            ratio = p50 / adk50
            verdict = "met" if ratio <= target else "NOT MET"
            ok = ok and ratio <= target
            print(
                f"    {LABELS[kind]:<24} p50 {p50 * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms   "
                f"ratio p50 {ratio:.2f}x  p95 {p95 / adk95:.2f}x  (target p50 <= {target}x: {verdict})"
            )
    print(
        "token delivery: model text deltas/s and token frames/s, first request sent -> last token frame"
        " (ratio = deltas/s / the echo consumer's)"
    )
    for scope, values in (
        ("one stream", delivery.single),
        (f"{streams} concurrent streams", delivery.aggregate),
    ):
        deltas, frames = values["echo"]
        print(
            f"  {scope}: raw Channels echo consumer {deltas:9.0f} deltas/s {frames:9.0f} frames/s (ceiling)"
        )
        for kind in ("ws", "sse", "adk"):
            if kind in values:
                deltas_k, frames_k = values[kind]
                versus = f"   {deltas_k / values['adk'][0]:.2f}x ADK's" if kind != "adk" else ""
                print(
                    f"    {LABELS[kind]:<24} {deltas_k:9.0f} deltas/s {frames_k:9.0f} frames/s"
                    f"   {deltas_k / deltas:.3f}x of ceiling{versus}"
                )
    print("memory (RSS growth of the server process)")
    print(
        f"  kgchat daphne: {memory.per_idle_kib:7.1f} KiB per idle websocket ({memory.idle_connections} open)"
    )
    print(
        f"  kgchat daphne: {memory.per_turn_kib:7.1f} KiB per running turn ({memory.running_turns} at once)"
        f"   ADK api_server: {memory.adk_per_turn_kib:7.1f} KiB per running turn"
        f"   ratio {memory.per_turn_kib / memory.adk_per_turn_kib:.2f}x"
    )
    return ok


def plot(lat: Latency, turns: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    xs = list(range(1, turns + 1))
    for kind, style in (("adk", "tab:red"), ("ws", "tab:blue"), ("sse", "tab:green")):
        per_turn = [statistics.median(conv[n] for conv in lat.long[kind]) * 1000 for n in range(turns)]
        ax.plot(xs, per_turn, label=LABELS[kind], color=style, linewidth=1.2)
    ax.set_xlabel("conversation length (turn number)")
    ax.set_ylabel("per-turn latency, ms (median over conversations)")
    ax.set_title("Same agent turn (instant model, 1 tool call, 200 deltas): kgchat vs adk api_server")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)

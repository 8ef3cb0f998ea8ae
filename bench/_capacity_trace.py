"""Where a ``bench.capacity --trace`` turn's first token went: the client's and the server's marks of
one turn lined up into steps, their medians, and the slowest turns with the garbage collector's
pauses that overlapped them."""

from __future__ import annotations

from typing import Any

from bench._stream_load_measure import Pace, Turn
from bench.load import _percentile as pct

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

"""Inline SVG charts of the usage page, drawn on the server (no script, no CDN, no chart library)."""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 720, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 16, 28
COLOURS = ("#3b6fd6", "#e08a2c", "#3a9a5b", "#c2455a", "#7d5bbf", "#6b7785")


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    step = 10 ** (len(str(int(value))) - 1)
    return float(((int(value) // step) + 1) * step)


def _fmt(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def _frame(
    title: str, top: float, labels: Sequence[str], body: list[str], legend: list[tuple[str, str]]
) -> str:
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg class="usage-chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" '
        f'xmlns="http://www.w3.org/2000/svg" aria-label={quoteattr(title)}>',
        f"<title>{escape(title)}</title>",
    ]
    for i in range(5):
        y = TOP + plot_h - plot_h * i / 4
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#8884" />')
        parts.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11" fill="currentColor">'
            f"{_fmt(top * i / 4)}</text>"
        )
    n = max(len(labels), 1)
    every = max(1, n // 8)
    for i, label in enumerate(labels):
        if i % every == 0:
            x = LEFT + plot_w * (i + 0.5) / n
            parts.append(
                f'<text x="{x:.1f}" y="{HEIGHT - 8}" text-anchor="middle" font-size="11" '
                f'fill="currentColor">{escape(label)}</text>'
            )
    parts += body
    for i, (name, colour) in enumerate(legend):
        x = LEFT + 8 + i * 110
        parts.append(f'<rect x="{x}" y="2" width="10" height="10" fill="{colour}" />')
        parts.append(f'<text x="{x + 14}" y="11" font-size="11" fill="currentColor">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]]) -> SafeString:
    """Grouped bars, one group per label (day), one bar per series."""
    top = _nice_max(max((v for _, values in series for v in values), default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    n, k = max(len(labels), 1), max(len(series), 1)
    slot = plot_w / n
    bar_w = max(slot * 0.8 / k, 1.0)
    body = []
    for s, (name, values) in enumerate(series):
        colour = COLOURS[s % len(COLOURS)]
        for i, value in enumerate(values):
            if value <= 0:
                continue
            h = plot_h * value / top
            x = LEFT + slot * i + slot * 0.1 + bar_w * s
            body.append(
                f'<rect class="bar" x="{x:.1f}" y="{TOP + plot_h - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{colour}"><title>{escape(labels[i])} {escape(name)}: {value:g}</title></rect>'
            )
    legend = (
        [(name, COLOURS[s % len(COLOURS)]) for s, (name, _) in enumerate(series)] if len(series) > 1 else []
    )
    return mark_safe(_frame(title, top, labels, body, legend))


def line_chart(
    title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]]
) -> SafeString:
    """Lines with a dot per known value; a day without a value breaks the line."""
    top = _nice_max(max((v for _, values in series for v in values if v is not None), default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    n = max(len(labels), 1)
    body = []
    for s, (name, values) in enumerate(series):
        colour = COLOURS[s % len(COLOURS)]
        points: list[str] = []
        for i, value in enumerate(values):
            if value is None:
                if len(points) > 1:
                    body.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="{colour}" />')
                points = []
                continue
            x, y = LEFT + plot_w * (i + 0.5) / n, TOP + plot_h - plot_h * value / top
            points.append(f"{x:.1f},{y:.1f}")
            body.append(
                f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}">'
                f"<title>{escape(labels[i])} {escape(name)}: {value:g} ms</title></circle>"
            )
        if len(points) > 1:
            body.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="{colour}" />')
    legend = [(name, COLOURS[s % len(COLOURS)]) for s, (name, _) in enumerate(series)]
    return mark_safe(_frame(title, top, labels, body, legend))


def breakdown_chart(title: str, counts: dict[str, int]) -> SafeString:
    """Horizontal bars, one per key (stop reason), longest first."""
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    height = 24 * max(len(rows), 1) + 8
    top = max((c for _, c in rows), default=0) or 1
    parts = [
        f'<svg class="usage-chart" role="img" viewBox="0 0 {WIDTH} {height}" width="100%" '
        f'xmlns="http://www.w3.org/2000/svg" aria-label={quoteattr(title)}>',
        f"<title>{escape(title)}</title>",
    ]
    label_w, bar_max = 140, WIDTH - 140 - 80
    for i, (name, count) in enumerate(rows):
        y = 4 + 24 * i
        w = max(bar_max * count / top, 1)
        colour = COLOURS[i % len(COLOURS)]
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end" font-size="12" fill="currentColor">'
            f"{escape(name)}</text>"
        )
        parts.append(
            f'<rect class="bar" x="{label_w}" y="{y + 2}" width="{w:.1f}" height="18" fill="{colour}">'
            f"<title>{escape(name)}: {count}</title></rect>"
        )
        parts.append(
            f'<text x="{label_w + w + 6:.1f}" y="{y + 15}" font-size="12" fill="currentColor">{count}</text>'
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))

"""A progress bar for long management commands (embedding a graph)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any


def progress_bar(stream: Any, label: str = "entities") -> Callable[[int, int], None]:
    """Return ``progress(done, total)`` drawing a bar on ``stream`` (only the last line when not a tty)."""
    started = time.monotonic()
    interactive = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        width = 30
        filled = width * done // total if total else width
        rate = done / max(time.monotonic() - started, 1e-6)
        line = f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label} ({rate:.1f}/s)"
        if interactive or done == total:
            stream.write(line, ending="\n" if done == total else "")
            stream.flush()

    return progress

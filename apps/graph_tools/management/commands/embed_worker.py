"""The background embedding worker: ``python manage.py embed_worker`` (``make run`` starts one)."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.graph_tools.services import embed_worker_serve


class Command(BaseCommand):
    help = (
        "Embed entities that wait for a vector (imports, write tools), batch after batch, at low CPU "
        "priority, until SIGINT/SIGTERM. Several workers share the queue; a restarted one resumes."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=None, help="Entities per batch.")
        parser.add_argument("--idle-seconds", type=float, default=2.0, help="Poll interval when idle.")
        parser.add_argument("--nice", type=int, default=10, help="Raise the niceness by this much.")

    def handle(self, *args: Any, **options: Any) -> None:
        # Below the app's processes: a turn's CPU comes first, embedding takes what is left.
        os.nice(max(0, options["nice"]))
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        self.stderr.write(f"embed_worker: pid {os.getpid()}, waiting for entities without a vector")
        total = embed_worker_serve(
            stop=stop,
            batch_size=options["batch_size"],
            idle_seconds=max(0.1, options["idle_seconds"]),
        )
        self.stderr.write(f"embed_worker: stopped after embedding {total} entities")

"""The background embedding worker: ``python manage.py embed_worker`` (``make run`` starts one)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import connections

from apps.graph_tools.services import embed_worker_serve

# One model process per core is the most entities per second on 2 cores (bench/embedding.py:
# two one-thread processes beat one process with two threads); beyond two the worker would take
# cores a larger machine's app processes may want, so more is an operator's choice.
DEFAULT_PROCESSES = min(2, os.cpu_count() or 1)


def _serve(options: dict[str, Any], stop: threading.Event) -> int:
    return embed_worker_serve(
        stop=stop,
        batch_size=options["batch_size"],
        idle_seconds=max(0.1, options["idle_seconds"]),
        project_id=options["project"],
    )


def _child(options: dict[str, Any]) -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    total = _serve(options, stop)
    print(f"embed_worker: process {os.getpid()} stopped after embedding {total} entities", flush=True)


class Command(BaseCommand):
    help = (
        "Embed entities that wait for a vector (imports, write tools), batch after batch, at low CPU "
        "priority, until SIGINT/SIGTERM. Several workers share the queue; a restarted one resumes."
    )
    # Started by make run after `migrate` has run the system checks (see bootstrap).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=None, help="Entities per batch.")
        parser.add_argument("--idle-seconds", type=float, default=2.0, help="Poll interval when idle.")
        parser.add_argument("--nice", type=int, default=10, help="Raise the niceness by this much.")
        parser.add_argument(
            "--project",
            type=uuid.UUID,
            default=None,
            help="Only this project's entities and passages, and no other background job "
            "(a one-off backfill or a benchmark beside the regular worker).",
        )
        parser.add_argument(
            "--processes",
            type=int,
            default=DEFAULT_PROCESSES,
            help=f"Model processes sharing the queue, one core each (default {DEFAULT_PROCESSES}).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # Below the app's processes: a turn's CPU comes first, embedding takes what is left.
        os.nice(max(0, options["nice"]))
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        processes = max(1, options["processes"])
        self.stderr.write(
            f"embed_worker: pid {os.getpid()}, {processes} process(es), waiting for entities without a vector"
        )
        if processes == 1:
            total = _serve(options, stop)
            self.stderr.write(f"embed_worker: stopped after embedding {total} entities")
            return
        # Children are forked with no model and no open connection or pool in this process: each
        # opens its own database connections and loads its own one-thread model.
        connections.close_all()
        for connection in connections.all(initialized_only=True):
            close_pool = getattr(connection, "close_pool", None)
            if close_pool is not None:
                close_pool()
        context = multiprocessing.get_context("fork")

        def start() -> Any:
            child = context.Process(target=_child, args=(options,), daemon=True)
            child.start()
            return child

        children = [start() for _ in range(processes)]
        while not stop.wait(1.0):
            # A child that died (a crash in the model) releases its claim with its connection;
            # a new one takes its place and resumes the queue.
            for i, child in enumerate(children):
                if not child.is_alive():
                    self.stderr.write(
                        f"embed_worker: process {child.pid} exited ({child.exitcode}); restarting"
                    )
                    children[i] = start()
        for child in children:
            if child.is_alive() and child.pid is not None:
                os.kill(child.pid, signal.SIGTERM)
        for child in children:
            child.join()
        self.stderr.write(f"embed_worker: stopped ({processes} processes)")

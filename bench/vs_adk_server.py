"""kgchat against ADK's own server (``adk api_server``): the same agent turn, side by side, one run.

Both servers serve the same agent: graph-query-agent's prompt and tools over a small graph in a
bench project, on the instant scripted model ``scripted/bench-vs-adk`` (one ``get_entity_edges``
call, then 200 one-word text deltas; see ``bench/_vs_adk_settings.py``), through the same
``ModelAdapter``. (a) kgchat: one daphne process on loopback, driven over the websocket and over
SSE (``POST /api/chat/stream``), persisting every turn to PostgreSQL as always. (b) ADK: ``adk
api_server`` with in-memory sessions on loopback, its own process, driven over ``/run_sse``
(``bench/_vs_adk_agent.py`` builds its ``LlmAgent``; the graph tools run through Django on the same
database). The same client code (``websockets``, ``httpx`` and one SSE reader) drives both.

Printed, each with its ratio:
- per-turn overhead, request sent → last frame, p50/p95, at conversation length 1 (a new
  conversation each turn; ADK's session is created before the clock starts) and at length 100
  (the last ``TAIL`` turns of ``--conversations`` conversations of ``--turns`` turns). Targets:
  kgchat ≤ 1.0× ADK at length 1, ≤ 0.5× at length 100. The turns of all three clients are
  interleaved, so a load spike from elsewhere on the machine hits them alike.
- token delivery: token frames/s of one stream and aggregated over ``--streams`` concurrent
  streams, against a raw Channels echo consumer served by the same daphne (the ceiling).
- memory: RSS of the daphne process per idle websocket and per running turn (psutil).
- a plot of per-turn latency against conversation length: ``docs/benchmarks/vs_adk.png``.

Everything runs on its own database ``kgchat_bench`` of the embedded PostgreSQL (created and
migrated when missing, reused after); the bench's rows are deleted and both servers stopped at the end.

Run: ``.venv/bin/python -m bench.vs_adk_server [--turns 100] [--conversations 2] [--short 30]``
(``make bench`` runs it in a child process with the defaults).

The parts: ``bench/support.py`` starts the processes; ``_vs_adk_world.py`` (database, data,
persistence check), ``_vs_adk_clients.py`` (one timed turn per client), ``_vs_adk_measure.py``
(latency, delivery, memory) and ``_vs_adk_report.py`` (figures and plot); this module runs them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.support import (
    DAPHNE,
    LOOPBACK,
    ROOT,
    ServerProcess,
    free_port,
    start_daphne,
    start_process,
    wait_ready,
)

PLOT = ROOT / "docs" / "benchmarks" / "vs_adk.png"
SETTINGS = "bench._vs_adk_settings"


# --- the two servers ------------------------------------------------------------------------------


def _start_adk(project_id: str, env: dict[str, str], tmp: Path) -> ServerProcess:
    """``adk api_server`` with in-memory sessions, serving ``bench/_vs_adk_agent.py``'s agent."""
    from bench._vs_adk_clients import APP

    agents = tmp / "agents" / APP
    agents.mkdir(parents=True)
    (agents / "__init__.py").write_text("from . import agent  # noqa: F401\n")
    (agents / "agent.py").write_text("from bench._vs_adk_agent import root_agent  # noqa: F401\n")
    port = free_port()
    argv = [
        str(DAPHNE.parent / "adk"),
        "api_server",
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        "--session_service_uri",
        "memory://",
        "--artifact_service_uri",
        "memory://",
        "--log_level",
        "warning",
        str(agents.parent),
    ]
    env = {**env, "BENCH_PROJECT_ID": project_id}
    return start_process("adk api_server", argv, port=port, env=env, log=tmp / "adk.log")


@contextmanager
def _servers(project_id: str, env: dict[str, str]) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """kgchat's daphne (with the echo consumer) and ADK's api_server, both listening; stopped after."""
    with tempfile.TemporaryDirectory() as tmp:
        kgchat = start_daphne(
            "kgchat daphne",
            env=env,
            log=Path(tmp) / "daphne.log",
            application="bench._vs_adk_asgi:application",
            quiet=True,
        )
        adk = _start_adk(project_id, env, Path(tmp))
        try:
            wait_ready(kgchat)
            wait_ready(adk)
            yield kgchat, adk
        except BaseException:
            print(f"--- {kgchat.name} log ---\n{kgchat.tail()}\n--- {adk.name} log ---\n{adk.tail()}")
            raise
        finally:
            kgchat.stop()
            adk.stop()


# --- entry points ----------------------------------------------------------------------------------


async def _run_all(
    args: argparse.Namespace, world: Any, kgchat: ServerProcess, adk: ServerProcess
) -> tuple[Any, ...]:
    from bench._vs_adk_clients import Clients
    from bench._vs_adk_measure import delivery, latency, memory

    clients = Clients(world, kgchat.port, adk.port)
    try:
        lat = await latency(clients, args.short, args.conversations, args.turns)
        mem = await memory(clients, kgchat.process.pid, adk.process.pid, args.idle, args.running)
        deliv = await delivery(clients, args.streams)
    finally:
        await clients.close()
    return lat, mem, deliv


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.vs_adk_server", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--turns", type=int, default=100, help="length of the long conversations (100)")
    parser.add_argument("--conversations", type=int, default=2, help="long conversations per client (2)")
    parser.add_argument("--short", type=int, default=30, help="length-1 turns per client (30)")
    parser.add_argument("--streams", type=int, default=200, help="concurrent streams for delivery (200)")
    parser.add_argument("--idle", type=int, default=200, help="idle websockets for memory (200)")
    parser.add_argument("--running", type=int, default=50, help="running turns for memory (50)")
    parser.add_argument("--timeout", type=float, default=420, help="give up after this many seconds (420)")
    parser.add_argument(
        "--plot", type=Path, default=PLOT, help=f"where the PNG goes ({PLOT.relative_to(ROOT)})"
    )
    return parser.parse_args(sys.argv[1:] if argv is None else argv)


def main(argv: list[str] | None = None) -> int:
    """Start both servers, measure, stop them, print the figures, write the plot; 1 if a target is missed."""
    args = _arguments(argv)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "PYTHONPATH": str(ROOT),
        "KGCHAT_LOG_LEVEL": "WARNING",
    }
    from bench._vs_adk_world import migrated_database

    url = migrated_database(env)
    env["DATABASE_URL"] = url
    os.environ.update({"DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": SETTINGS})
    import django

    django.setup()
    from bench._vs_adk_report import plot, report
    from bench._vs_adk_world import arrange, check_database, cleanup

    world = arrange()
    try:
        with _servers(world.project_id, env) as (kgchat, adk):
            lat, mem, deliv = asyncio.run(asyncio.wait_for(_run_all(args, world, kgchat, adk), args.timeout))
            problems = check_database(list(lat.answers), lat.answers)
    finally:
        cleanup(world)
    ok = report(lat, args.turns, args.streams, deliv, mem, load)
    print(
        f"  persistence: every measured kgchat turn of the long conversations in PostgreSQL: {'yes' if not problems else 'NO'}"
    )
    for problem in problems[:10]:
        print(f"    {problem}")
    plot(lat, args.turns, args.plot)
    print(f"plot: {args.plot.relative_to(ROOT) if args.plot.is_relative_to(ROOT) else args.plot}")
    return 0 if ok and not problems else 1


def run() -> None:
    """Entry point of ``python -m bench`` (``make bench``): a child process, on the bench database."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    done = subprocess.run([sys.executable, "-m", "bench.vs_adk_server"], cwd=ROOT, env=env, timeout=540)
    if done.returncode != 0:
        # Speed is reported, not asserted: the other benchmarks still run.
        print("bench.vs_adk_server: a target was missed or the run failed (see above)", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())

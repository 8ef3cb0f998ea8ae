"""The delay between a user's message and the model's first request; a profile of one agent turn.

1. Measured inside one daphne process (app ``bench._stream_load_asgi``, settings
   ``bench._stream_load_server`` with the instant model): the time from the server receiving the
   ``chat.message`` frame (websocket) or the ``POST /api/chat/stream`` body (SSE) to the provider's
   ``stream`` being called for it. One user sends the turns one after the other, in pairs: a
   question in a new conversation, then a follow-up in it (graph-query-agent: one tool call, then
   20 deltas). Printed p50 / p90 / p99 per transport and kind. Target: p50 <= 10 ms.
2. ``--profile``: the same turns (websocket-free: ``chat.turns.service.turn_start`` then the frame
   bus, as a transport does) in this process, under cProfile, on every thread (the turn's database
   calls run on a thread of their own): the functions with the most cumulative and own time per
   turn, the in-process message -> first model request delay, and the SQL statements a turn sends
   before and after its first model request.

Run: ``.venv/bin/python -m bench.first_request [--turns 300] [--sse 100] [--profile [--profile-turns 50]]``
(``python -m bench first_request`` runs part 1; part of ``make bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.load import ORIGIN, _arrange, _cleanup, _setup_django
from bench.load import _percentile as pct
from bench.support import start_daphne, wait_ready

TARGET_P50_MS = 10.0


@dataclass
class Delays:
    """Message -> first model request, in seconds, by (transport, kind)."""

    values: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, transport: str, pairs: dict[str, list[float]]) -> None:
        for question, (received, first) in pairs.items():
            kind = "follow-up" if question.startswith("follow-up") else "new conversation"
            self.values.setdefault((transport, kind), []).append(first - received)


async def _ws_turns(
    url: str, session: str, project_id: str, agent_id: str, pairs: int, errors: list[str]
) -> None:
    from websockets.asyncio.client import connect

    async with connect(
        url,
        origin=ORIGIN,
        additional_headers={"Cookie": f"sessionid={session}"},
        max_size=None,  # type: ignore[arg-type]
    ) as ws:
        for n in range(pairs):
            conversation: str | None = None
            for kind in ("new", "follow-up"):
                request: dict[str, Any] = {
                    "type": "chat.message",
                    "message": f"{kind} ws {n}: what is Paris connected to?",
                }
                if conversation is None:
                    request |= {"projectId": project_id, "agentDefinitionId": agent_id}
                else:
                    request["conversationId"] = conversation
                await ws.send(json.dumps(request))
                while True:
                    frame = json.loads(await ws.recv())
                    if frame["type"] == "meta":
                        conversation = frame["conversationId"]
                    elif frame["type"] == "error":
                        errors.append(f"{frame.get('code')}: {frame.get('error')}")
                        if "seq" not in frame:
                            break
                    elif frame["type"] == "done":
                        break


async def _sse_turns(
    base: str, token: str, project_id: str, agent_id: str, pairs: int, errors: list[str]
) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=60) as client:
        for n in range(pairs):
            conversation: str | None = None
            for kind in ("new", "follow-up"):
                body: dict[str, Any] = {"message": f"{kind} sse {n}: what is Paris connected to?"}
                if conversation is None:
                    body |= {"projectId": project_id, "agentDefinitionId": agent_id}
                else:
                    body["conversationId"] = conversation
                async with client.stream(
                    "POST", f"{base}/api/chat/stream", json=body, headers=headers
                ) as response:
                    if response.status_code != 200:
                        errors.append(f"HTTP {response.status_code}: {(await response.aread())[:200]!r}")
                        continue
                    async for line in response.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        frame = json.loads(line[5:])
                        if frame["type"] == "meta":
                            conversation = frame["conversationId"]
                        elif frame["type"] == "error":
                            errors.append(f"{frame.get('code')}: {frame.get('error')}")


def _probe(base: str) -> dict[str, list[float]]:
    import httpx

    return dict(httpx.get(f"{base}/bench/first-request/", timeout=30).json())


def measure_server(turns: int, sse_turns: int) -> Delays:
    """Part 1: sequential turns against one daphne process; the server's own timestamps."""
    from apps.projects.services import api_token_create

    project, agent, users, sessions = _arrange(1)
    _, token = api_token_create(user=users[0], project=project, name="bench first request")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench._stream_load_server",
        "BENCH_STREAM_MODEL": "bench-instant",
        "KGCHAT_LOG_LEVEL": "WARNING",
    }
    delays = Delays()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            server = start_daphne(
                "daphne",
                env=env,
                log=Path(tmp) / "daphne.log",
                application="bench._stream_load_asgi:application",
                quiet=True,
            )
            try:
                wait_ready(server)
                ids = (str(project.id), str(agent.id))
                # Warm-up, not counted: the first turns import and connect what they need.
                asyncio.run(_ws_turns(server.ws, sessions[0], *ids, 3, delays.errors))
                asyncio.run(_sse_turns(server.http, token, *ids, 3, delays.errors))
                _probe(server.http)
                asyncio.run(_ws_turns(server.ws, sessions[0], *ids, turns // 2, delays.errors))
                delays.add("websocket", _probe(server.http))
                if sse_turns:
                    asyncio.run(_sse_turns(server.http, token, *ids, sse_turns // 2, delays.errors))
                    delays.add("SSE", _probe(server.http))
            finally:
                server.stop(30)
                if delays.errors:
                    print(server.tail(20))
    finally:
        _cleanup(project, users, sessions)
    return delays


def print_server(delays: Delays) -> bool:
    print(f"machine: {os.cpu_count()} cores; load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(
        "message received by the server -> the model's first request (one daphne process, turns one at a time)"
    )
    print(f"{'transport':>10} {'turn':>17} {'n':>5} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8}")
    every: list[float] = []
    for (transport, kind), values in sorted(delays.values.items()):
        every += values
        print(
            f"{transport:>10} {kind:>17} {len(values):>5} {pct(values, 0.5) * 1000:>8.1f} "
            f"{pct(values, 0.9) * 1000:>8.1f} {pct(values, 0.99) * 1000:>8.1f}"
        )
    p50 = pct(every, 0.5) * 1000
    print(
        f"target: p50 <= {TARGET_P50_MS:.0f} ms over all {len(every)} turns: {p50:.1f} ms, {'met' if p50 <= TARGET_P50_MS else 'NOT met'}"
    )
    print(f"errors: {len(delays.errors)}")
    for error in sorted(set(delays.errors))[:5]:
        print(f"  {delays.errors.count(error)} x {error}")
    return not delays.errors


# --- part 2: the profile ------------------------------------------------------------------------


@contextmanager
def _profile_every_thread() -> Iterator[list[cProfile.Profile]]:
    """cProfile this thread and every thread started meanwhile (each gets its own profiler)."""
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start_in_thread(frame: Any, event: str, arg: Any) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile()
        with lock:
            profiles.append(profile)
        profile.enable()

    main = cProfile.Profile()
    profiles.append(main)
    threading.setprofile(start_in_thread)
    main.enable()
    try:
        yield profiles
    finally:
        main.disable()
        threading.setprofile(None)  # type: ignore[arg-type]


@contextmanager
def _count_sql() -> Iterator[list[float]]:
    """The time.perf_counter() of every SQL statement Django sends meanwhile, on any thread."""
    from django.db.backends.signals import connection_created

    sent: list[float] = []

    def wrapper(execute: Any, sql: Any, params: Any, many: Any, context: Any) -> Any:
        sent.append(time.perf_counter())
        return execute(sql, params, many, context)

    def install(sender: Any, connection: Any, **kwargs: Any) -> None:
        if wrapper not in connection.execute_wrappers:
            connection.execute_wrappers.append(wrapper)

    connection_created.connect(install)
    try:
        yield sent
    finally:
        connection_created.disconnect(install)


async def _inprocess_turns(
    principal: Any, project_id: str, agent_id: str, provider: Any, pairs: int
) -> list[tuple[float, str]]:
    from apps.chat.streams.bus import get_bus
    from apps.chat.turns import service as services

    started: list[tuple[float, str]] = []
    for n in range(pairs):
        conversation: str | None = None
        for kind in ("new", "follow-up"):
            question = f"{kind} profile {n}-{time.monotonic_ns()}"
            started.append((time.perf_counter(), question))
            handle = await services.turn_start(
                principal=principal,
                message=question,
                project_id=project_id if conversation is None else None,
                conversation_id=conversation,
                agent_definition_id=agent_id if conversation is None else None,
                provider=provider,
            )
            conversation = handle.conversation_id
            async for frame in get_bus().subscribe(conversation, after_seq=0, include_finished=True):
                if frame.type == "error":
                    raise RuntimeError(f"profiled turn failed: {frame}")
                if frame.type == "done":
                    break
    return started


def profile_turns(turns: int, top: int = 25) -> None:
    """Part 2: ``turns`` agent turns in this process under cProfile; print the top of the profile."""
    from django.test.utils import override_settings

    from apps.agents.llm.base import Done, TextDelta, Usage
    from apps.agents.llm.scripted import ScriptedProvider, tool_call
    from apps.projects.selectors import principal_from_user

    first: dict[str, float] = {}

    def respond(messages: list[Any], tools: list[Any]) -> list[Any]:
        question = next((m.content for m in reversed(messages) if m.role == "user"), "")
        first.setdefault(question, time.perf_counter())
        if messages and messages[-1].role == "tool":
            return [
                *(TextDelta(text=f"t{i} ") for i in range(20)),
                Done(usage=Usage(input_tokens=5, output_tokens=20)),
            ]
        return [
            tool_call("get_entity_edges", {"entity_id": "paris"}),
            Done(usage=Usage(input_tokens=4, output_tokens=1)),
        ]

    provider = ScriptedProvider(responder=respond, name="scripted/bench-profile")
    project, agent, users, sessions = _arrange(1)
    principal = principal_from_user(users[0])
    ids = (str(project.id), str(agent.id))
    # As in the measured server: the rate limit's query runs, its limit is never reached.
    with override_settings(KGCHAT_TURNS_PER_MINUTE=1_000_000):
        try:
            _profiled_turns(principal, ids, provider, first, turns, top)
        finally:
            _cleanup(project, users, sessions)


def _profiled_turns(
    principal: Any, ids: tuple[str, str], provider: Any, first: dict[str, float], turns: int, top: int
) -> None:
    asyncio.run(_inprocess_turns(principal, *ids, provider, 3))  # warm-up
    first.clear()
    with _count_sql() as sql, _profile_every_thread() as profiles:
        began = time.perf_counter()
        started = asyncio.run(_inprocess_turns(principal, *ids, provider, turns // 2))
        elapsed = time.perf_counter() - began
    count = len(started)
    delays = [first[q] - t for t, q in started if q in first]
    ends = [t for t, _ in started[1:]] + [float("inf")]
    before = after = 0
    for (t0, q), t1 in zip(started, ends, strict=True):
        before += sum(1 for s in sql if t0 <= s < first.get(q, t0))
        after += sum(1 for s in sql if first.get(q, t1) <= s < t1)
    print(
        f"profile: {count} agent turns in this process (instant model: 1 tool call + 20 deltas), all threads"
    )
    print(f"  wall time per turn under the profiler: {elapsed / count * 1000:.1f} ms")
    print(f"  message -> first model request (in process, profiled): p50 {pct(delays, 0.5) * 1000:.1f} ms")
    print(
        f"  SQL statements per turn: {before / count:.1f} before the first model request, {after / count:.1f} after"
    )
    stats = pstats.Stats(profiles[0])
    for extra in profiles[1:]:
        try:
            stats.add(extra)
        except (TypeError, ValueError):  # a thread whose profiler recorded nothing
            continue
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        stats.stream = out  # type: ignore[attr-defined]
        stats.sort_stats(order).print_stats(top)
        lines = [line for line in out.getvalue().splitlines() if line.strip()]
        start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
        print(f"  top {top} by {order} (times are totals over {count} turns):")
        for line in lines[start : start + top + 1]:
            print("    " + line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.first_request", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--turns", type=int, default=300, help="websocket turns (300)")
    parser.add_argument("--sse", type=int, default=100, help="SSE turns (100; 0 skips)")
    parser.add_argument("--profile", action="store_true", help="also profile turns in this process")
    parser.add_argument("--profile-turns", type=int, default=50, help="turns under the profiler (50)")
    parser.add_argument("--no-server", action="store_true", help="skip part 1")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    _setup_django()
    ok = True
    if not args.no_server:
        ok = print_server(measure_server(args.turns, args.sse))
    if args.profile:
        profile_turns(args.profile_turns)
    return 0 if ok else 1


def run() -> None:
    """Entry point of ``python -m bench`` (``make bench``): part 1 only."""
    if main([]) != 0:
        raise SystemExit("bench.first_request: errors (see above)")


if __name__ == "__main__":
    raise SystemExit(main())

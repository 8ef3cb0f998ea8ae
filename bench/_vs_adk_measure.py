"""The measurements of ``bench.vs_adk_server``: per-turn latency by conversation length, token
delivery against a raw Channels echo consumer, and the memory a connection and a turn cost."""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench._vs_adk_clients import QUESTION, Clients, TurnResult, echo_turn

HANDSHAKES = 20


def check(result: TurnResult, where: str) -> TurnResult:
    expected = "".join(f"t{i} " for i in range(200))
    if result.errors:
        raise RuntimeError(f"{where}: turn failed: {result.errors[:3]}")
    if result.text != expected:
        raise RuntimeError(f"{where}: streamed text differs from the model's ({len(result.text)} chars)")
    return result


@dataclass
class Latency:
    short: dict[str, list[float]] = field(default_factory=lambda: {"ws": [], "sse": [], "adk": []})
    # by transport: one list per conversation, one elapsed per turn
    long: dict[str, list[list[float]]] = field(default_factory=lambda: {"ws": [], "sse": [], "adk": []})
    answers: dict[str, list[str]] = field(default_factory=dict)


async def latency(clients: Clients, short: int, conversations: int, turns: int) -> Latency:
    out = Latency()
    ws = await clients.connect()
    try:
        # Warm-up, not measured: the first turns import and connect what each server needs.
        for _ in range(2):
            check(await clients.ws_turn(ws, None), "kgchat ws warm-up")
            check(await clients.sse_turn(None), "kgchat SSE warm-up")
            check(await clients.adk_turn(await clients.adk_session()), "ADK warm-up")
        for _ in range(short):
            out.short["ws"].append(check(await clients.ws_turn(ws, None), "kgchat ws").elapsed)
            out.short["sse"].append(check(await clients.sse_turn(None), "kgchat SSE").elapsed)
            session = await clients.adk_session()
            out.short["adk"].append(check(await clients.adk_turn(session), "ADK").elapsed)
        ids: dict[str, list[str | None]] = {"ws": [None] * conversations, "sse": [None] * conversations}
        adk_ids = [await clients.adk_session() for _ in range(conversations)]
        for kind in out.long:
            out.long[kind] = [[] for _ in range(conversations)]
        for n in range(turns):
            for c in range(conversations):
                question = f"Question {n + 1}: {QUESTION}"
                r = check(await clients.ws_turn(ws, ids["ws"][c], question), f"kgchat ws turn {n + 1}")
                ids["ws"][c] = r.conversation_id
                out.long["ws"][c].append(r.elapsed)
                out.answers.setdefault(str(r.conversation_id), []).append(r.text)
                r = check(await clients.sse_turn(ids["sse"][c], question), f"kgchat SSE turn {n + 1}")
                ids["sse"][c] = r.conversation_id
                out.long["sse"][c].append(r.elapsed)
                out.answers.setdefault(str(r.conversation_id), []).append(r.text)
                r = check(await clients.adk_turn(adk_ids[c], question), f"ADK turn {n + 1}")
                out.long["adk"][c].append(r.elapsed)
    finally:
        await ws.close()
    return out


@dataclass
class Delivery:
    # by client: (text deltas/s, frames/s), one stream alone and ``streams`` at once
    single: dict[str, tuple[float, float]] = field(default_factory=dict)
    aggregate: dict[str, tuple[float, float]] = field(default_factory=dict)


def _rate(results: list[TurnResult]) -> tuple[float, float]:
    """Model text deltas and token frames per second, from the first request sent to the last token frame."""
    began = min(r.started for r in results)
    ended = max(r.tokens[-1] for r in results)
    deltas = sum(r.text.count(" ") for r in results)  # every delta of the bench model is one word
    frames = sum(len(r.tokens) for r in results)
    return deltas / (ended - began), frames / (ended - began)


async def delivery(clients: Clients, streams: int, repeats: int = 5) -> Delivery:
    out = Delivery()
    # One stream at a time: the median of a few.
    ws = await clients.connect()
    echo = await clients.connect("/ws/bench-echo/")
    try:
        singles: dict[str, list[tuple[float, float]]] = {"ws": [], "sse": [], "adk": [], "echo": []}
        for _ in range(repeats):
            singles["ws"].append(_rate([check(await clients.ws_turn(ws, None), "kgchat ws")]))
            singles["sse"].append(_rate([check(await clients.sse_turn(None), "kgchat SSE")]))
            session = await clients.adk_session()
            singles["adk"].append(_rate([check(await clients.adk_turn(session), "ADK")]))
            singles["echo"].append(_rate([await echo_turn(echo, 200)]))
        out.single = {
            k: (statistics.median(d for d, _ in v), statistics.median(f for _, f in v))
            for k, v in singles.items()
        }
    finally:
        await ws.close()
        await echo.close()

    # Many streams at once: every socket connected first, then every request sent together.
    async def many(path: str, run: Callable[[Any], Any]) -> tuple[float, float]:
        gate = asyncio.Semaphore(HANDSHAKES)

        async def open_one() -> Any:
            async with gate:
                return await clients.connect(path)

        sockets = await asyncio.gather(*(open_one() for _ in range(streams)))
        try:
            results = await asyncio.gather(*(run(s) for s in sockets))
        finally:
            await asyncio.gather(*(s.close() for s in sockets), return_exceptions=True)
        return _rate(results)

    async def ws_one(s: Any) -> TurnResult:
        return check(await clients.ws_turn(s, None), "kgchat ws (concurrent)")

    async def echo_one(s: Any) -> TurnResult:
        return await echo_turn(s, 200)

    out.aggregate["echo"] = await many("/ws/bench-echo/", echo_one)
    out.aggregate["ws"] = await many("/ws/chat/", ws_one)
    sessions = [await clients.adk_session() for _ in range(streams)]
    adk = await asyncio.gather(*(clients.adk_turn(s) for s in sessions))
    out.aggregate["adk"] = _rate([check(r, "ADK (concurrent)") for r in adk])
    return out


@dataclass
class Memory:
    idle_connections: int = 0
    per_idle_kib: float = float("nan")
    running_turns: int = 0
    per_turn_kib: float = float("nan")
    adk_per_turn_kib: float = float("nan")


async def _peak_rss(pid: int, task: asyncio.Future[Any], every: float = 0.05) -> tuple[int, Any]:
    import psutil

    process = psutil.Process(pid)
    peak = process.memory_info().rss
    while not task.done():
        peak = max(peak, process.memory_info().rss)
        await asyncio.sleep(every)
    return peak, task.result()


async def memory(clients: Clients, kgchat_pid: int, adk_pid: int, idle: int, running: int) -> Memory:
    """RSS growth of daphne for ``idle`` open websockets, then for ``running`` slow turns on them."""
    import psutil

    from bench._vs_adk_settings import SLOW_PREFIX

    out = Memory(idle_connections=idle, running_turns=running)
    daphne = psutil.Process(kgchat_pid)
    await asyncio.sleep(0.5)
    before = daphne.memory_info().rss
    gate = asyncio.Semaphore(HANDSHAKES)

    async def open_one() -> Any:
        async with gate:
            return await clients.connect()

    sockets = await asyncio.gather(*(open_one() for _ in range(idle)))
    try:
        await asyncio.sleep(1.0)
        with_idle = daphne.memory_info().rss
        out.per_idle_kib = (with_idle - before) / idle / 1024
        slow = f"{SLOW_PREFIX} {QUESTION}"
        turns = asyncio.gather(*(clients.ws_turn(s, None, slow) for s in sockets[:running]))
        peak, results = await _peak_rss(kgchat_pid, turns)
        for r in results:
            check(r, "kgchat slow turn")
        out.per_turn_kib = (peak - with_idle) / running / 1024
    finally:
        await asyncio.gather(*(s.close() for s in sockets), return_exceptions=True)
    adk = psutil.Process(adk_pid)
    sessions = [await clients.adk_session() for _ in range(running)]
    await asyncio.sleep(0.5)
    adk_before = adk.memory_info().rss
    adk_turns = asyncio.gather(*(clients.adk_turn(s, f"{SLOW_PREFIX} {QUESTION}") for s in sessions))
    adk_peak, results = await _peak_rss(adk_pid, adk_turns)
    for r in results:
        check(r, "ADK slow turn")
    out.adk_per_turn_kib = (adk_peak - adk_before) / running / 1024
    return out

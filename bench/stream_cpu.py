"""CPU per streaming turn, in this process: where ``bench.stream_load``'s one-process ceiling comes from.

N graph-query-agent turns start together in this process (``chat.turns.service.turn_start``, then the
frame bus, as the websocket consumer does; every frame is turned into its JSON text as the consumer
would send it), with the paced scripted model of ``bench.stream_load`` (0.5 s to the first item of
every request, then 50 tokens/s; a tool call, then 200 one-word deltas). No daphne, no sockets, no
client in the process: the event loop's CPU is the turn's own (admission, ADK, frames, the bus).

Printed: CPU per turn (this process, all threads, and the event loop's thread alone), token frames per turn (fewer when the
deltas were merged), and with ``--profile`` the top of a cProfile of the event loop's thread.

Run: ``.venv/bin/python -m bench.stream_cpu [--turns 200] [--profile] [--top 40]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys
import time
from typing import Any

from bench.load import _arrange, _cleanup, _setup_django

TOKENS = 200


def _provider(tokens: int) -> Any:
    from apps.agents.llm.base import Done, TextDelta, Usage
    from apps.agents.llm.scripted import Pace, ScriptedProvider, tool_call

    def respond(messages: list[Any], tools: list[Any]) -> list[Any]:
        if messages and messages[-1].role == "tool":
            return [
                *(TextDelta(text=f"t{i} ") for i in range(tokens)),
                Done(usage=Usage(input_tokens=500, output_tokens=tokens)),
            ]
        return [tool_call("get_entity_edges", {"entity_id": "paris"}), Done(usage=Usage(input_tokens=4))]

    class Provider(ScriptedProvider):
        def stream(self, messages: Any, tools: Any, config: Any) -> Any:
            self.calls.clear()  # a long run must not keep every request
            return super().stream(messages, tools, config)

    return Provider(responder=respond, pace=Pace(), name="scripted/bench-cpu")


async def _turn(principal: Any, project_id: str, agent_id: str, provider: Any, n: int) -> tuple[int, str]:
    from apps.chat.streams.bus import get_bus
    from apps.chat.turns import service as services

    handle = await services.turn_start(
        principal=principal,
        message=f"question {n}-{time.monotonic_ns()}",
        project_id=project_id,
        agent_definition_id=agent_id,
        provider=provider,
    )
    frames = 0
    text: list[str] = []
    async for frame in get_bus().subscribe(handle.conversation_id, after_seq=0, include_finished=True):
        frame.text()  # the JSON text the consumer sends
        if frame.type == "token":
            frames += 1
            text.append(frame.token)  # type: ignore[union-attr]
        elif frame.type == "error":
            raise RuntimeError(f"turn {n} failed: {frame}")
        elif frame.type == "done":
            break
    return frames, "".join(text)


async def _all(principal: Any, ids: tuple[str, str], provider: Any, turns: int) -> list[tuple[int, str]]:
    return await asyncio.gather(*(_turn(principal, *ids, provider, n) for n in range(turns)))


async def _frame_path(streams: int, frames: int) -> float:
    """CPU seconds (this thread) to send ``streams`` x ``frames`` token frames through the frame bus
    to one subscriber each, which builds the JSON text a socket sends; one frame per pass of the loop."""
    from apps.chat.streams.bus import InProcessFrameBus
    from apps.chat.streams.frames import DoneFrame, TokenFrame

    bus = InProcessFrameBus(retention_seconds=0)

    async def produce(key: str) -> None:
        for seq in range(1, frames + 1):
            await bus.publish(key, TokenFrame(seq=seq, token=f"t{seq} "))
            await asyncio.sleep(0)
        await bus.publish(key, DoneFrame(seq=frames + 1, messageId=None, runId=None))

    async def consume(key: str) -> int:
        return sum([len(frame.text()) async for frame in bus.subscribe(key)])

    keys = [f"c{n}" for n in range(streams)]
    for key in keys:
        await bus.begin(key, "t")
    started = time.thread_time()
    await asyncio.gather(*(consume(k) for k in keys), *(produce(k) for k in keys))
    return time.thread_time() - started


async def _delta_path(streams: int, deltas: int, window: float) -> tuple[float, int]:
    """CPU seconds (this thread) and sink calls for ``streams`` x ``deltas`` text deltas, one per pass
    of the loop, through the model adapter's merging (``coalesce_text``) to a sink."""
    from apps.agents.adk.model_adapter import coalesce_text
    from apps.agents.llm.base import TextDelta

    async def model() -> Any:
        for n in range(deltas):
            await asyncio.sleep(0)
            yield TextDelta(text=f"t{n} ")

    async def run() -> int:
        sent = 0
        async for _ in coalesce_text(model(), window):
            sent += 1
        return sent

    started = time.thread_time()
    sent = await asyncio.gather(*(run() for _ in range(streams)))
    return time.thread_time() - started, sum(sent)


def _admissions(principal: Any, ids: tuple[str, str], count: int) -> None:
    """CPU of admitting a message (``chat.turns.admission.turn_admit``: checks, conversation, user message,
    run row, in one transaction), one after another in this thread; the turns are not run."""
    from apps.chat.turns import admission

    def admit(n: int) -> None:
        admission.turn_admit(
            principal=principal,
            message=f"admission {n}-{time.monotonic_ns()}",
            project_id=ids[0],
            conversation_id=None,
            agent_definition_id=ids[1],
        )

    for n in range(5):  # warm-up
        admit(n)
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    for n in range(count):
        admit(n)
    cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
    print(
        f"admission ({count} in a row, this thread): {cpu / count * 1000:.2f} ms CPU and"
        f" {wall / count * 1000:.2f} ms wall each"
    )


def _paths(streams: int) -> None:
    frames = 200
    cpu = min(asyncio.run(_frame_path(streams, frames)) for _ in range(3))
    per = cpu / (streams * frames)
    print(
        f"frame path ({streams} streams x {frames} token frames, bus -> subscriber -> JSON text):"
        f" {per * 1e6:.1f} us CPU per frame ({1 / per:,.0f} frames/s on one core)"
    )
    for window in (0.02,):
        runs = [asyncio.run(_delta_path(streams, frames, window)) for _ in range(3)]
        cpu, sent = min(runs)
        per = cpu / (streams * frames)
        print(
            f"delta path ({streams} streams x {frames} deltas, one per loop pass, window {window * 1000:.0f} ms):"
            f" {per * 1e6:.1f} us CPU per delta, {sent / streams:.1f} merged deltas out per stream"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stream_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns at once (200)")
    parser.add_argument("--profile", action="store_true", help="cProfile the event loop's thread")
    parser.add_argument("--top", type=int, default=40, help="profile lines to print (40)")
    parser.add_argument("--profile-out", help="also write the profile to this file (pstats)")
    parser.add_argument(
        "--paths", action="store_true", help="only the per-frame and per-delta paths, without turns"
    )
    parser.add_argument(
        "--admissions", action="store_true", help="only the CPU of admitting --turns messages, one by one"
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    _setup_django()
    if args.paths:
        _paths(args.turns)
        return 0
    import logging

    logging.disable(logging.INFO)  # as in the measured server: warnings only
    from django.test.utils import override_settings

    from apps.projects.selectors import principal_from_user

    provider = _provider(TOKENS)
    project, agent, users, sessions = _arrange(1)
    principal = principal_from_user(users[0])
    ids = (str(project.id), str(agent.id))
    if args.admissions:
        try:
            with override_settings(KGCHAT_TURNS_PER_MINUTE=1_000_000):
                _admissions(principal, ids, args.turns)
        finally:
            _cleanup(project, users, sessions)
        return 0
    expected = "".join(f"t{i} " for i in range(TOKENS))
    try:
        with override_settings(KGCHAT_TURNS_PER_MINUTE=1_000_000):
            asyncio.run(_all(principal, ids, provider, 2))  # warm-up: imports, first connections
            profile = cProfile.Profile() if args.profile else None
            cpu0, wall0, loop0 = time.process_time(), time.perf_counter(), time.thread_time()
            if profile is not None:
                profile.enable()
            results = asyncio.run(_all(principal, ids, provider, args.turns))
            if profile is not None:
                profile.disable()
            loop_cpu = time.thread_time() - loop0
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    finally:
        _cleanup(project, users, sessions)
    wrong = sum(1 for _, text in results if text != expected)
    frames = sum(f for f, _ in results) / len(results)
    print(f"{args.turns} turns at once in process: wall {wall:.1f} s, CPU {cpu:.1f} s")
    print(
        f"  CPU per turn {cpu / args.turns * 1000:.1f} ms (the event loop's thread {loop_cpu / args.turns * 1000:.1f} ms);"
        f" token frames per turn {frames:.1f}; wrong text {wrong}"
    )
    if profile is not None:
        if args.profile_out:
            profile.dump_stats(args.profile_out)
        out = io.StringIO()
        stats = pstats.Stats(profile, stream=out)
        for order in ("tottime", "cumulative"):
            stats.sort_stats(order).print_stats(args.top)
        print(out.getvalue())
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())

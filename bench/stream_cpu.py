"""CPU per streaming turn, in this process: where ``bench.stream_load``'s one-process ceiling comes from.

N graph-query-agent turns start together in this process (``chat.services.turn_start``, then the
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
import json
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
    from apps.chat import services
    from apps.chat.bus import get_bus

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
        json.dumps(frame.wire())  # what the consumer's send_json does
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stream_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns at once (200)")
    parser.add_argument("--profile", action="store_true", help="cProfile the event loop's thread")
    parser.add_argument("--top", type=int, default=40, help="profile lines to print (40)")
    parser.add_argument("--profile-out", help="also write the profile to this file (pstats)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    _setup_django()
    import logging

    logging.disable(logging.INFO)  # as in the measured server: warnings only
    from django.test.utils import override_settings

    from apps.projects.selectors import principal_from_user

    provider = _provider(TOKENS)
    project, agent, users, sessions = _arrange(1)
    principal = principal_from_user(users[0])
    ids = (str(project.id), str(agent.id))
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

"""The executor's own overhead per agent turn, at conversation lengths 1, 50 and 200 turns.

The model is scripted and answers instantly: one tool call (``list_entity_types``), then an
answer of 200 tokens. What is measured is everything else: building the ADK agent, the session
and its history window, the ADK runner, the tool call, the callbacks and the audit rows in
PostgreSQL. A long conversation must not make a turn slower: the target is
``per-turn(200) <= 1.5 x per-turn(1)``.

Run: ``.venv/bin/python -m bench.turn_overhead`` (uses the local database; its rows are removed).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from typing import Any

LENGTHS = (1, 50, 200)
TARGET_RATIO = 1.5


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    if not os.environ.get("DATABASE_URL"):
        from apps.core import embedded_db

        embedded_db.start()
    import logging

    import django

    django.setup()
    logging.getLogger("google_adk").setLevel(logging.WARNING)


def _history(turns: int) -> list[Any]:
    from apps.agents.history import HistoryMessage, HistoryToolCall

    answer = "word " * 200
    out: list[HistoryMessage] = []
    for i in range(turns):
        call = f"hist-{i}"
        out += [
            HistoryMessage(role="user", content=f"Question {i}: which types exist?"),
            HistoryMessage(
                role="assistant", tool_calls=[HistoryToolCall(id=call, name="list_entity_types", input={})]
            ),
            HistoryMessage(
                role="tool",
                content='{"types": [{"type": "Person", "count": 2}]}',
                tool_calls=[HistoryToolCall(id=call, name="list_entity_types", output={"types": []})],
            ),
            HistoryMessage(role="assistant", content=answer),
        ]
    return out


def _provider() -> Any:
    from apps.agents.llm.base import Done, TextDelta, Usage
    from apps.agents.llm.scripted import ScriptedProvider, tool_call

    def respond(messages: list[Any], tools: list[Any]) -> list[Any]:
        if messages and messages[-1].role == "tool":
            return [
                *(TextDelta(text="tok ") for _ in range(200)),
                Done(usage=Usage(input_tokens=500, output_tokens=200)),
            ]
        return [tool_call("list_entity_types", {}), Done(usage=Usage(input_tokens=400, output_tokens=10))]

    return ScriptedProvider(responder=respond, name="scripted/bench")


async def _measure(definition: Any, turns: int, repeats: int) -> list[float]:
    from apps.agents.executor import AgentExecutor, ExecuteRequest

    executor = AgentExecutor()
    history = _history(turns - 1)
    timings: list[float] = []
    events = 0

    def on_event(_: Any) -> None:
        nonlocal events
        events += 1

    for i in range(repeats + 2):
        request = ExecuteRequest(
            agent_definition=definition,
            message="Which types exist?",
            history=history,
            provider=_provider(),
            stream_callback=on_event,
        )
        started = time.perf_counter()
        result = await executor.execute(request)
        elapsed = time.perf_counter() - started
        if result.status != "success":
            raise RuntimeError(f"bench turn failed: {result.error}")
        if i >= 2:  # the first turns warm imports and connections
            timings.append(elapsed)
    return timings


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def _run(repeats: int) -> dict[int, list[float]]:
    from asgiref.sync import sync_to_async

    from apps.agents.models import AgentDefinition
    from apps.projects.models import Project

    def setup() -> tuple[Project, AgentDefinition]:
        project, _ = Project.objects.get_or_create(
            slug="bench-turn-overhead", defaults={"name": "bench turn overhead"}
        )
        definition, _ = AgentDefinition.objects.update_or_create(
            project=project,
            name="bench-agent",
            defaults={
                "system_prompt": "Answer from the graph.",
                "tools": ["list_entity_types"],
                "max_steps": 5,
            },
        )
        return project, definition

    project, definition = await sync_to_async(setup)()
    try:
        return {n: await _measure(definition, n, repeats) for n in LENGTHS}
    finally:
        await sync_to_async(project.delete)()


def main(argv: list[str] | None = None) -> int:
    """Print median and p95 per turn at each length, and the ratio of 200 turns to 1 turn."""
    args = sys.argv[1:] if argv is None else argv
    repeats = int(args[0]) if args else 30
    _setup_django()
    results = asyncio.run(_run(repeats))
    print(
        f"executor overhead per turn (scripted instant model, 1 tool call, 200 tokens; {repeats} turns each)"
    )
    print(f"{'turns':>6} {'median ms':>10} {'p95 ms':>8}")
    for n, values in results.items():
        print(f"{n:>6} {statistics.median(values) * 1000:>10.1f} {_p95(values) * 1000:>8.1f}")
    ratio = statistics.median(results[LENGTHS[-1]]) / statistics.median(results[LENGTHS[0]])
    verdict = "ok" if ratio <= TARGET_RATIO else "TOO SLOW"
    print(f"ratio {LENGTHS[-1]} vs {LENGTHS[0]} turns: {ratio:.2f}x (target <= {TARGET_RATIO}x) {verdict}")
    return 0 if ratio <= TARGET_RATIO else 1


def run() -> None:
    """Entry point of ``python -m bench`` (``make bench``)."""
    main([])


if __name__ == "__main__":
    raise SystemExit(main())

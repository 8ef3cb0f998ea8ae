"""What storing a turn's ADK events costs (``bench.turn_resume``'s first part): agent turns through the
executor with the scripted model, ``agent_run_events_append`` timed per call and per turn, the rows a
turn stores, and the whole turn with and without storing."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

LENGTHS = (1, 50)
REPEATS = int(os.environ.get("BENCH_RESUME_REPEATS", "20"))


def _history(turns: int) -> list[Any]:
    from bench.turn_overhead import _history as history

    return history(turns)


async def _store_cost(definition: Any, turns: int, *, store: bool = True) -> dict[str, float]:
    from apps.agents import services
    from apps.agents.executor import AgentExecutor, ExecuteRequest
    from apps.agents.models import AgentRunEvent
    from bench.turn_overhead import _provider

    append = services.agent_run_events_append
    calls: list[float] = []
    rows: list[int] = []

    async def timed(*, run_id: Any, rows: Any) -> None:
        started = time.perf_counter()
        if store:  # else: the turn as it would be without storing its events (not resumable)
            await append(run_id=run_id, rows=rows)
        calls.append(time.perf_counter() - started)

    services.agent_run_events_append = timed  # type: ignore[assignment]
    per_turn: list[float] = []
    stored: list[int] = []
    try:
        for i in range(REPEATS + 2):
            calls.clear()
            request = ExecuteRequest(
                agent_definition=definition,
                message="Which types exist?",
                history=_history(turns - 1),
                provider=_provider(),
            )
            started = time.perf_counter()
            result = await AgentExecutor().execute(request)
            elapsed = time.perf_counter() - started
            if result.status != "success":
                raise RuntimeError(f"bench turn failed: {result.error}")
            if i >= 2:
                per_turn.append(elapsed)
                rows.append(len(calls))
                stored.append(
                    await AgentRunEvent.objects.filter(run_id=result.run_id).acount() if store else 0
                )
                appends = list(calls)
                per_turn_append = sum(appends)
                calls.clear()
                _store_cost.samples.append((appends, per_turn_append))  # type: ignore[attr-defined]
    finally:
        services.agent_run_events_append = append  # type: ignore[assignment]
    samples = _store_cost.samples  # type: ignore[attr-defined]
    every = [a for appends, _ in samples for a in appends]
    totals = [t for _, t in samples]
    _store_cost.samples = []  # type: ignore[attr-defined]
    return {
        "turn_ms": statistics.median(per_turn) * 1000,
        "append_ms": statistics.median(every) * 1000,
        "appends": statistics.median(rows),
        "store_ms_per_turn": statistics.median(totals) * 1000,
        "rows_per_turn": statistics.median(stored),
    }


_store_cost.samples = []  # type: ignore[attr-defined]


async def store_costs() -> dict[int, dict[str, float]]:
    from asgiref.sync import sync_to_async

    from apps.agents.models import AgentDefinition
    from apps.projects.models import Project

    def setup() -> tuple[Project, AgentDefinition]:
        project, _ = Project.objects.get_or_create(
            slug="bench-turn-resume", defaults={"name": "bench turn resume"}
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
        costs = {n: await _store_cost(definition, n) for n in LENGTHS}
        for n in LENGTHS:
            costs[n]["turn_ms_unstored"] = (await _store_cost(definition, n, store=False))["turn_ms"]
        return costs
    finally:
        await sync_to_async(project.delete)()

"""The servers a ``bench.capacity`` run measures, started fresh (one or two kgchat processes, or ADK's
``api_server``), and one turn on each kind: a kgchat websocket turn, an ADK session and ``/run_sse``."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._stream_load_measure import Pace, Turn, paced_turn, postmaster_pid
from bench.load import ORIGIN
from bench.stream_load import _servers
from bench.support import ROOT, ServerProcess, wait_ready

# A turn with nothing for this long is an error of the run (a guard against hanging, not a figure).
FRAME_TIMEOUT = 60.0


async def _kgchat_turn(
    url: str, session: str, project_id: str, agent_id: str, question: str, turn: Turn
) -> None:
    from websockets.asyncio.client import connect

    result = turn.result
    try:
        async with connect(
            url,
            origin=ORIGIN,  # type: ignore[arg-type]
            additional_headers={"Cookie": f"sessionid={session}"},
            open_timeout=FRAME_TIMEOUT,
            max_size=None,
        ) as ws:
            await paced_turn(ws, question, project_id, agent_id, turn, frame_timeout=FRAME_TIMEOUT)
    except Exception as exc:  # a refused or broken connection is an error of the run, not a crash
        result.errors.append(f"{type(exc).__name__}: {exc}")


async def _adk_turn(http: Any, base: str, question: str, turn: Turn) -> None:
    from bench._vs_adk_clients import APP

    result = turn.result
    try:
        created = await http.post(f"{base}/apps/{APP}/users/bench/sessions", json={})
        created.raise_for_status()
        body = {
            "app_name": APP,
            "user_id": "bench",
            "session_id": created.json()["id"],
            "new_message": {"role": "user", "parts": [{"text": question}]},
            "streaming": True,
        }
        parts: list[str] = []
        turn.sent = time.perf_counter()
        async with http.stream("POST", f"{base}/run_sse", json=body) as response:
            if response.status_code != 200:
                await response.aread()
                raise RuntimeError(f"HTTP {response.status_code}: {response.text[:200]}")
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                arrived = time.perf_counter()
                frame = json.loads(line[5:])
                if frame.get("error") or frame.get("errorCode") or frame.get("error_code"):
                    result.errors.append(str(frame)[:200])
                if not frame.get("partial"):
                    continue  # the final event repeats the whole text
                content = frame.get("content") or {}
                text = "".join(p.get("text", "") for p in content.get("parts") or [] if not p.get("thought"))
                if text:
                    parts.append(text)
                    turn.record(arrived, text)
        result.questions.append(question)
        result.answers.append("".join(parts))
    except Exception as exc:
        result.errors.append(f"{type(exc).__name__}: {exc}")


@dataclass
class Target:
    """The servers of one kind, started, and how to send them a turn."""

    name: str
    servers: list[ServerProcess]
    others: dict[str, list[int]]
    sessions: list[str]
    project_id: str
    agent_id: str

    async def turn(self, n: int, question: str, turn: Turn, http: Any) -> None:
        server = self.servers[n % len(self.servers)]
        if self.name == "adk":
            await _adk_turn(http, server.http, question, turn)
        else:
            session = self.sessions[n % len(self.sessions)]
            await _kgchat_turn(server.ws, session, self.project_id, self.agent_id, question, turn)


def _env(pace: Pace, trace: bool = False) -> dict[str, str]:
    return {
        **os.environ,
        **pace.env(),
        "DJANGO_SETTINGS_MODULE": "bench._stream_load_server",
        "BENCH_STREAM_MODEL": "bench-paced",
        "KGCHAT_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
        "BENCH_TRACE": "1" if trace else "",
    }


@contextmanager
def target_started(
    name: str, pace: Pace, world: tuple[Any, Any, list[Any], list[str]], logs: Path, trace: bool = False
) -> Iterator[Target]:
    project, agent, _, sessions = world
    postmaster = postmaster_pid()
    others: dict[str, list[int]] = {"postgres": [postmaster] if postmaster else []}
    with ExitStack() as stack:
        if name == "adk":
            from bench.vs_adk_server import _start_adk

            adk = _start_adk(str(project.id), _env(pace), logs)
            stack.callback(adk.stop)
            wait_ready(adk)
            servers = [adk]
        else:
            servers, redis = stack.enter_context(
                _servers(2 if name == "kgchat2" else 1, _env(pace, trace), logs)
            )
            if redis is not None:
                others["redis"] = [redis]
        yield Target(name, servers, others, sessions, str(project.id), str(agent.id))


async def warm(target: Target) -> None:
    """One turn on each server first, not measured: the first turn imports and connects what it needs."""
    import httpx

    async with httpx.AsyncClient(timeout=FRAME_TIMEOUT) as http:
        for n in range(len(target.servers)):
            turn = Turn()
            await target.turn(n, f"cap-warm-{time.monotonic_ns()} {n}", turn, http)
            if turn.result.errors:
                raise RuntimeError(f"the warm-up turn on {target.name} failed: {turn.result.errors}")

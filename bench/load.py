"""Load: N concurrent websocket clients against ONE daphne process, each doing agent turns.

One real daphne process is started on a free loopback port (settings ``bench._load_server``: the
app as configured locally, with the instant scripted model ``scripted/bench-load`` — one
``get_entity_edges`` call, then 200 tokens — so what is measured is kgchat, not a model). N users
each open a websocket (session cookie, allowed Origin) and run T turns of graph-query-agent on a
small graph, one after the other in one conversation, all users at once: the clients connect
(``HANDSHAKES`` at a time), and once all are connected every client starts its turns together.

Printed: turns/s, p50/p99 time to first token and to ``done``, errors (any ``error`` frame, a
refused connection, a timeout; must be 0). Afterwards the database is checked: every turn has its
user message, the tool call and result, and the assistant message equal to the streamed tokens, in
order, and no run is left ``running``. Everything the bench created is deleted; the server is stopped.

Run: ``.venv/bin/python -m bench.load [--clients 200] [--turns 5] [--timeout 600]`` (or ``make bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.support import start_daphne, wait_ready, ws_turn

ORIGIN = "http://127.0.0.1"
# Websocket handshakes in flight at once while the clients connect (before any turn starts): daphne
# drops a handshake not done within 5 s, and 200 at once on a busy 2-core machine take longer.
HANDSHAKES = 20


@dataclass
class ClientResult:
    conversation_id: str | None = None
    ttft: list[float] = field(default_factory=list)
    done: list[float] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    if not os.environ.get("DATABASE_URL"):
        from apps.core import embedded_db

        embedded_db.start()
    import django

    django.setup()


def _arrange(clients: int) -> tuple[Any, Any, list[Any], list[str]]:
    """A project with a small graph and graph-query-agent; N member users with a session each."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from apps.agents.definitions import default_agents_install
    from apps.agents.models import AgentDefinition
    from apps.graph_tools.models import GraphObject, GraphRelationship
    from apps.projects.models import ProjectMembership
    from apps.projects.services import project_create

    User = get_user_model()
    tag = uuid.uuid4().hex[:8]
    users = User.objects.bulk_create([User(username=f"bench-load-{tag}-{i}") for i in range(clients)])
    project = project_create(owner=users[0], name=f"bench load {tag}")
    ProjectMembership.objects.bulk_create(
        [ProjectMembership(project=project, user=u, role="viewer") for u in users[1:]]
    )
    nodes = {
        key: GraphObject.objects.create(project=project, key=key, type=kind, name=key.title())
        for key, kind in [("paris", "City"), ("lyon", "City"), ("france", "Country"), ("euro", "Currency")]
    }
    for src, kind, dst in [("paris", "CAPITAL_OF", "france"), ("lyon", "LOCATED_IN", "france")]:
        GraphRelationship.objects.create(project=project, src=nodes[src], type=kind, dst=nodes[dst])
    GraphRelationship.objects.create(
        project=project, src=nodes["france"], type="USES_CURRENCY", dst=nodes["euro"]
    )
    default_agents_install(project=project)
    agent = AgentDefinition.objects.get(project=project, name="graph-query-agent")
    sessions = []
    for user in users:
        client = Client()
        client.force_login(user)
        sessions.append(client.cookies["sessionid"].value)
    return project, agent, users, sessions


def _cleanup(project: Any, users: list[Any], sessions: list[str]) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.models import Session

    project.delete()
    Session.objects.filter(session_key__in=sessions).delete()
    get_user_model().objects.filter(id__in=[u.id for u in users]).delete()


@dataclass
class Gate:
    """Handshakes a few at a time, then every client's turns at once."""

    handshakes: asyncio.Semaphore
    expected: int
    connected: int = 0
    go: asyncio.Event = field(default_factory=asyncio.Event)

    async def ready(self) -> None:
        self.connected += 1
        if self.connected >= self.expected:
            self.go.set()
        await self.go.wait()


async def gated_connect(url: str, session: str, gate: Gate | None) -> Any:
    """A logged-in chat websocket; with ``gate``, at most its number of handshakes at once, and
    back only when every client of the gate is connected (so turns start together)."""
    from websockets.asyncio.client import connect

    if gate is not None:
        await gate.handshakes.acquire()
    try:
        return await connect(
            url,
            origin=ORIGIN,  # type: ignore[arg-type]
            additional_headers={"Cookie": f"sessionid={session}"},
            open_timeout=120,
            max_size=None,
        )
    finally:
        if gate is not None:
            gate.handshakes.release()
            await gate.ready()


async def _client(
    port: int,
    session: str,
    project_id: str,
    agent_id: str,
    turns: int,
    result: ClientResult,
    gate: Gate | None = None,
) -> None:
    try:
        ws = await gated_connect(f"ws://127.0.0.1:{port}/ws/chat/", session, gate)
        async with ws:
            for n in range(turns):
                question = f"Question {n}: what is Paris connected to?"
                request: dict[str, Any] = {"type": "chat.message", "message": question}
                if result.conversation_id is None:
                    request |= {"projectId": project_id, "agentDefinitionId": agent_id}
                else:
                    request["conversationId"] = result.conversation_id
                started = time.perf_counter()
                tokens_at: list[float] = []
                answer = await ws_turn(
                    ws, request, result, on_token=lambda at, _token, seen=tokens_at: seen.append(at)
                )
                if tokens_at:
                    result.ttft.append(tokens_at[0] - started)
                result.done.append(time.perf_counter() - started)
                result.questions.append(question)
                result.answers.append(answer)
    except Exception as exc:  # a refused or broken connection is an error of the run, not a crash
        result.errors.append(f"{type(exc).__name__}: {exc}")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _check_database(results: list[ClientResult], turns: int) -> tuple[int, list[str]]:
    """Count the turns whose rows are all there and in order; describe the others."""
    from apps.agents.models import AgentRun
    from apps.chat.models import Message

    complete = 0
    problems: list[str] = []
    ids = [r.conversation_id for r in results if r.conversation_id]
    for _ in range(600):  # a client that gave up leaves its turn running: let it end (<= 60 s)
        if not AgentRun.objects.filter(conversation_id__in=ids, status="running").exists():
            break
        time.sleep(0.1)
    for r in results:
        if r.conversation_id is None:
            problems.append("a client never got a conversation")
            continue
        rows = list(
            Message.objects.filter(conversation_id=r.conversation_id)
            .order_by("created_at", "id")
            .values_list("role", "content", "tool_calls")
        )
        for n in range(turns):
            chunk = rows[4 * n : 4 * n + 4]
            expected_roles = ["user", "assistant", "tool", "assistant"]
            question = r.questions[n] if n < len(r.questions) else None
            answer = r.answers[n] if n < len(r.answers) else None
            # A client that gave up (an error of the run) never saw the question's end: its turn is
            # still complete when the server stored it whole.
            gave_up = question is None and bool(r.errors)
            ok = (
                [role for role, _, _ in chunk] == expected_roles
                and (gave_up or chunk[0][1] == question)
                and chunk[1][2]
                and chunk[1][2][0]["name"] == "get_entity_edges"
                and (gave_up or chunk[3][1] == answer)
            )
            if ok:
                complete += 1
            else:
                problems.append(
                    f"conversation {r.conversation_id} turn {n + 1}: rows {[c[0] for c in chunk]}"
                )
        if len(rows) != 4 * turns:
            problems.append(f"conversation {r.conversation_id}: {len(rows)} rows, expected {4 * turns}")
    running = AgentRun.objects.filter(conversation_id__in=ids, status="running").count()
    if running:
        problems.append(f"{running} runs left running")
    return complete, problems


async def _load(
    port: int, sessions: list[str], project_id: str, agent_id: str, turns: int
) -> tuple[list[ClientResult], float]:
    # One turn first, not measured: the server's first turn imports and connects what it needs.
    warmup = ClientResult()
    await _client(port, sessions[-1], project_id, agent_id, 1, warmup)
    if warmup.errors:
        raise RuntimeError(f"the warm-up turn failed: {warmup.errors}")
    sessions = sessions[:-1]
    results = [ClientResult() for _ in sessions]
    gate = Gate(handshakes=asyncio.Semaphore(HANDSHAKES), expected=len(sessions))
    clients = [
        asyncio.create_task(_client(port, s, project_id, agent_id, turns, r, gate))
        for s, r in zip(sessions, results, strict=True)
    ]
    await gate.go.wait()
    started = time.perf_counter()
    await asyncio.gather(*clients)
    return results, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    """Run the load; print the figures; return 1 on any error or lost turn."""
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200, help="concurrent websocket clients (200)")
    parser.add_argument("--turns", type=int, default=5, help="agent turns per client (5)")
    parser.add_argument("--timeout", type=float, default=600, help="give up after this many seconds (600)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    _setup_django()
    project, agent, users, sessions = _arrange(args.clients + 1)  # the last one warms the server up
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench._load_server", "KGCHAT_LOG_LEVEL": "WARNING"}
    with tempfile.TemporaryDirectory() as tmp:
        server = start_daphne("daphne", env=env, log=Path(tmp) / "daphne.log", quiet=True)
        try:
            wait_ready(server)
            try:
                results, elapsed = asyncio.run(
                    asyncio.wait_for(
                        _load(server.port, sessions, str(project.id), str(agent.id), args.turns),
                        args.timeout,
                    )
                )
            except TimeoutError:
                print(f"load did not finish within {args.timeout:.0f} s")
                return 1
            complete, problems = _check_database(results, args.turns)
        finally:
            server.stop(30)
            server_log = server.output()
            _cleanup(project, users, sessions)

    expected = args.clients * args.turns
    done_turns = sum(len(r.done) for r in results)
    errors = [e for r in results for e in r.errors]
    ttft = [t for r in results for t in r.ttft]
    finished = [t for r in results for t in r.done]
    print(
        f"load: {args.clients} websocket clients x {args.turns} agent turns on one daphne process "
        f"(scripted/bench-load: 1 tool call + 200 tokens per turn)"
    )
    print(
        f"  turns          {done_turns} of {expected} in {elapsed:.1f} s = {done_turns / elapsed:.1f} turns/s"
    )
    print(
        f"  first token    p50 {_percentile(ttft, 0.5) * 1000:.0f} ms   p99 {_percentile(ttft, 0.99) * 1000:.0f} ms"
    )
    print(
        f"  done           p50 {_percentile(finished, 0.5) * 1000:.0f} ms   p99 {_percentile(finished, 0.99) * 1000:.0f} ms"
    )
    print(f"  errors         {len(errors)}")
    for error in sorted(set(errors))[:10]:
        print(f"    {errors.count(error)} x {error}")
    print(
        f"  in database    {complete} of {expected} turns complete and in order; lost {expected - complete}"
    )
    for problem in problems[:10]:
        print(f"    {problem}")
    if errors and server_log.strip():
        print("  server log (tail):")
        print("    " + "\n    ".join(server_log.strip().splitlines()[-20:]))
    return 0 if not errors and complete == expected else 1


def run() -> None:
    """Entry point of ``python -m bench`` (``make bench``): the default load, 200 clients x 5 turns."""
    if main([]) != 0:
        raise SystemExit("bench.load: errors or lost turns (see above)")


if __name__ == "__main__":
    raise SystemExit(main())

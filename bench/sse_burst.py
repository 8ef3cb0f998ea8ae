"""Burst: N new conversations started at the same instant by U users over SSE, half plain, half agent.

One real daphne process (settings ``bench._load_server``: the app as configured locally, rate limit
and pool included, with the instant scripted model: an agent turn calls ``get_entity_edges`` once
and then streams 200 tokens, a plain turn streams them at once). U users, each with an API token
(``Authorization: Bearer``, as API clients send it), post N ``POST /api/chat/stream`` requests at
once, N/U each, alternating plain and agent conversations.

Printed per burst size: the answers by HTTP status and error code, the turns that ended with
``done`` and a stored answer, time to the last ``done``, and the most database connections the
server held at once (sampled from ``pg_stat_activity`` every 20 ms; the pool's limit is
``KGCHAT_DB_POOL_MAX``). Any error or lost turn fails the run.

Issue #23 item 6: before the fix, 32 of 50 answered ``503 database_busy`` exactly 10 s after the burst.

Run: ``.venv/bin/python -m bench.sse_burst [--turns 50 200] [--users 10]`` (or ``make bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.load import _setup_django
from bench.support import start_daphne, wait_ready


@dataclass
class Outcome:
    status: int = 0
    code: str = ""
    frames: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def answered(self) -> bool:
        done = [f for f in self.frames if f.get("type") == "done"]
        errors = [f for f in self.frames if f.get("type") == "error"]
        return self.status == 200 and not errors and bool(done) and bool(done[-1].get("messageId"))


def _arrange(users: int) -> tuple[Any, Any, list[Any], list[str]]:
    """A project with a small graph and graph-query-agent; U member users with an API token each."""
    from django.contrib.auth import get_user_model

    from apps.agents.definitions import default_agents_install
    from apps.agents.models import AgentDefinition
    from apps.graph_tools.models import GraphObject, GraphRelationship
    from apps.projects.models import ProjectMembership
    from apps.projects.services import api_token_create, project_create

    User = get_user_model()
    tag = uuid.uuid4().hex[:8]
    people = User.objects.bulk_create([User(username=f"bench-burst-{tag}-{i}") for i in range(users)])
    project = project_create(owner=people[0], name=f"bench burst {tag}")
    ProjectMembership.objects.bulk_create(
        [ProjectMembership(project=project, user=u, role="viewer") for u in people[1:]]
    )
    nodes = {
        key: GraphObject.objects.create(project=project, key=key, type=kind, name=key.title())
        for key, kind in [("paris", "City"), ("france", "Country")]
    }
    GraphRelationship.objects.create(
        project=project, src=nodes["paris"], type="CAPITAL_OF", dst=nodes["france"]
    )
    default_agents_install(project=project)
    agent = AgentDefinition.objects.get(project=project, name="graph-query-agent")
    tokens = [api_token_create(user=u)[1] for u in people]
    return project, agent, people, tokens


def _cleanup(project: Any, people: list[Any]) -> None:
    from django.contrib.auth import get_user_model

    project.delete()
    get_user_model().objects.filter(id__in=[u.id for u in people]).delete()


def _connections_now() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


async def _turn(client: httpx.AsyncClient, token: str, body: dict[str, Any], start: asyncio.Event) -> Outcome:
    outcome = Outcome()
    await start.wait()
    began = time.monotonic()
    async with client.stream(
        "POST", "/api/chat/stream", json=body, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        outcome.status = response.status_code
        if response.status_code != 200:
            outcome.code = json.loads(await response.aread()).get("code", "")
        else:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    outcome.frames.append(json.loads(line[len("data: ") :]))
    outcome.seconds = time.monotonic() - began
    return outcome


async def _burst(
    port: int, tokens: list[str], project_id: str, agent_id: str, turns: int
) -> tuple[list[Outcome], float, int]:
    start = asyncio.Event()
    peak = 0
    limits = httpx.Limits(max_connections=turns + 10, max_keepalive_connections=turns + 10)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", timeout=httpx.Timeout(120, connect=60), limits=limits
    ) as client:
        tasks = []
        for i in range(turns):
            body: dict[str, Any] = {"message": f"Where is Paris? ({i})", "projectId": project_id}
            if i % 2:
                body["agentDefinitionId"] = agent_id
            tasks.append(asyncio.create_task(_turn(client, tokens[i % len(tokens)], body, start)))
        await asyncio.sleep(0.2)
        began = time.monotonic()
        start.set()
        gathered = asyncio.gather(*tasks)
        while not gathered.done():
            peak = max(peak, await asyncio.to_thread(_connections_now))
            await asyncio.sleep(0.02)
        outcomes = await gathered
    return outcomes, time.monotonic() - began, peak


def _stored(outcomes: list[Outcome]) -> int:
    from apps.chat.models import Message

    ids = [o.frames[-1]["messageId"] for o in outcomes if o.answered]
    return Message.objects.filter(id__in=ids, role="assistant").count()


def main(argv: list[str] | None = None) -> int:
    """Run each burst; print the figures; return 1 on any error or lost turn."""
    parser = argparse.ArgumentParser(prog="python -m bench.sse_burst", description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[50, 200], help="burst sizes (50 200)")
    parser.add_argument("--users", type=int, default=10, help="users sending them (10)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    _setup_django()
    from django.conf import settings

    failed = False
    for turns in args.turns:
        project, agent, people, tokens = _arrange(args.users)
        # The user's rate limit (KGCHAT_TURNS_PER_MINUTE, 30 by default) must let every user send its share.
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench._load_server", "KGCHAT_LOG_LEVEL": "WARNING"}
        per_user = -(-turns // args.users)
        if per_user > settings.KGCHAT_TURNS_PER_MINUTE > 0:
            env["KGCHAT_TURNS_PER_MINUTE"] = str(per_user)
        with tempfile.TemporaryDirectory() as tmp:
            server = start_daphne("daphne", env=env, log=Path(tmp) / "daphne.log", quiet=True)
            try:
                wait_ready(server)
                outcomes, elapsed, peak = asyncio.run(
                    _burst(server.port, tokens, str(project.id), str(agent.id), turns)
                )
                stored = _stored(outcomes)
            finally:
                server.stop(30)
                server_log = server.output()
                _cleanup(project, people)
        answered = sum(o.answered for o in outcomes)
        statuses = Counter(f"{o.status} {o.code}".strip() for o in outcomes)
        frame_errors = Counter(f["code"] for o in outcomes for f in o.frames if f.get("type") == "error")
        print(
            f"sse_burst: {turns} new conversations at once by {args.users} users over SSE "
            f"(half plain, half agent; pool max {settings.KGCHAT_DB_POOL_MAX})"
        )
        print(f"  answers        {dict(statuses)}")
        print(f"  error frames   {dict(frame_errors) or 0}")
        print(f"  answered       {answered} of {turns}; stored {stored}; last done after {elapsed:.1f} s")
        print(f"  connections    at most {peak} held by the server at once")
        if answered != turns or stored != turns:
            failed = True
            print("  server log (tail):\n    " + "\n    ".join(server_log.strip().splitlines()[-15:]))
    return 1 if failed else 0


def run() -> None:
    """Entry point of ``python -m bench`` (``make bench``): bursts of 50 and 200."""
    if main([]) != 0:
        raise SystemExit("bench.sse_burst: errors or lost turns (see above)")


if __name__ == "__main__":
    raise SystemExit(main())

"""Many new conversations started at once over SSE by several users (issue #23 item 6).

Used by ``test_burst.py`` (50 conversations, in ``make test``) and ``bench/burst.py`` (200, with
figures). Every turn is a real ``POST /api/chat/stream`` of a logged-in user, all released
together; what each one got is kept: its status, its frames (checked as they arrive) or its error
body, and when it ended.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.blackbox.clients import TIMEOUT, Api
from tests.blackbox.shapes import check_error_body, check_frame, check_turn
from tests.blackbox.world import create_user


@dataclass
class Outcome:
    user: str
    agent: bool
    status: int = 0
    frames: list[dict[str, Any]] = field(default_factory=list)
    body: dict[str, Any] | None = None  # the error body of a refused request
    failure: str = ""  # a transport failure (no answer at all)
    seconds: float = 0.0  # from the common start to the end of the answer

    @property
    def conversation_id(self) -> str | None:
        return self.frames[0].get("conversationId") if self.frames else None

    @property
    def done(self) -> dict[str, Any] | None:
        return self.frames[-1] if self.frames and self.frames[-1]["type"] == "done" else None

    @property
    def answered(self) -> bool:
        """200, ended with ``done`` carrying a ``messageId``, no ``error`` frame."""
        done = self.done
        return (
            self.status == 200
            and done is not None
            and done["messageId"] is not None
            and not any(f["type"] == "error" for f in self.frames)
        )

    def summary(self) -> str:
        if self.failure:
            return f"no answer ({self.failure})"
        if self.status != 200:
            return f"{self.status} {(self.body or {}).get('code')}"
        errors = [f["code"] for f in self.frames if f["type"] == "error"]
        if errors:
            return f"200, error frame {errors[0]}"
        return "200, done" if self.done else "200, no done"


@dataclass
class Burst:
    outcomes: list[Outcome]
    seconds: float

    def tally(self) -> Counter[str]:
        return Counter(o.summary() for o in self.outcomes)

    def report(self) -> str:
        ended = sorted(o.seconds for o in self.outcomes)
        middle = ended[len(ended) // 2] if ended else 0.0
        lines = [
            f"{len(self.outcomes)} conversations ({sum(o.agent for o in self.outcomes)} agent) by "
            f"{len({o.user for o in self.outcomes})} users in {self.seconds:.1f} s; "
            f"ended after: median {middle:.1f} s, last {ended[-1] if ended else 0:.1f} s",
            *(f"  {count:3d} x {what}" for what, count in self.tally().most_common()),
        ]
        return "\n".join(lines)


async def _one(
    client: httpx.AsyncClient,
    csrf: str,
    body: dict[str, Any],
    outcome: Outcome,
    start: asyncio.Event,
    t0: list[float],
) -> None:
    await start.wait()
    try:
        async with client.stream(
            "POST", "/api/chat/stream", json=body, headers={"X-CSRFToken": csrf}
        ) as response:
            outcome.status = response.status_code
            if response.status_code != 200:
                outcome.body = json.loads(await response.aread())
                check_error_body(outcome.body)
            else:
                data: list[str] = []
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        data.append(line[5:].strip())
                    elif line == "" and data:
                        frame = json.loads("\n".join(data))
                        data = []
                        check_frame(frame)
                        outcome.frames.append(frame)
                        if frame["type"] == "done":
                            break
    except httpx.HTTPError as exc:
        outcome.failure = f"{type(exc).__name__}: {exc}"
    outcome.seconds = time.monotonic() - t0[0]


async def burst_async(users: list[Api], project_id: str, agent_id: str, per_user: int) -> Burst:
    """``per_user`` new conversations for each user, all started at once; every other one is an
    agent conversation (``agent_id``), the rest plain."""
    start, t0 = asyncio.Event(), [0.0]
    clients = [
        httpx.AsyncClient(
            base_url=api.base_url,
            cookies=api.http.cookies,
            timeout=httpx.Timeout(TIMEOUT * 5),
            limits=httpx.Limits(max_connections=per_user + 2),
        )
        for api in users
    ]
    tasks, outcomes = [], []
    try:
        for n in range(len(users) * per_user):
            api, client = users[n % len(users)], clients[n % len(users)]
            agent = n % 2 == 0
            body: dict[str, Any] = {"message": f"Burst question {n}", "projectId": project_id}
            if agent:
                body["agentDefinitionId"] = agent_id
            outcome = Outcome(user=api.username, agent=agent)
            outcomes.append(outcome)
            tasks.append(asyncio.create_task(_one(client, api.csrf, body, outcome, start, t0)))
        await asyncio.sleep(0)
        t0[0] = time.monotonic()
        start.set()
        await asyncio.gather(*tasks)
    finally:
        for client in clients:
            await client.aclose()
    for outcome in outcomes:
        if outcome.done is not None:
            check_turn(outcome.frames)
    return Burst(outcomes=outcomes, seconds=time.monotonic() - t0[0])


def crowd_make(admin: Api, owner: Api, users: int, prefix: str = "burst") -> tuple[list[Api], str, str]:
    """``users`` users added in the admin, viewers of a new project of ``owner``'s with the
    default agents, each logged in; and the project's ``graph-query-agent``."""
    project = owner.call("POST /api/projects", 201, json={"name": prefix.capitalize()}).json()["id"]
    owner.call("POST /api/admin/projects/{project_id}/install-default-agents", 200, project_id=project)
    agents = owner.call("GET /api/projects/{project_id}/agent-definitions", 200, project_id=project).json()
    agent = next(a["id"] for a in agents["items"] if a["name"] == "graph-query-agent")
    logged_in = []
    for n in range(1, users + 1):
        username = f"{prefix}{n:02d}"
        create_user(admin, username)
        owner.call(
            "POST /api/projects/{project_id}/members", 201, json={"username": username}, project_id=project
        )
        logged_in.append(Api(owner.base_url, owner.openapi).login(username))
    return logged_in, project, agent

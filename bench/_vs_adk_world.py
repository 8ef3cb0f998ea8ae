"""The data of ``bench.vs_adk_server``: its own database, the user, project and graph it measures
on, and the check that every measured kgchat turn was persisted."""

from __future__ import annotations

import subprocess
import sys
import uuid
from dataclasses import dataclass

from bench.support import ROOT

DATABASE = "kgchat_bench"


def _database_url(*, fresh: bool = False) -> str:
    """Create the bench database on the embedded cluster when missing (anew if ``fresh``); return its URL."""
    import psycopg

    from apps.core import embedded_db

    embedded_db.start()
    host = embedded_db.socket_dir()
    with psycopg.connect(dbname="postgres", user=embedded_db.SUPERUSER, host=host, autocommit=True) as db:
        if fresh:
            db.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        if db.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone() is None:
            db.execute(f"CREATE DATABASE {DATABASE}")
    return f"postgresql://{embedded_db.SUPERUSER}@/{DATABASE}?host={host}"


def migrated_database(env: dict[str, str]) -> str:
    """The bench database, migrated; rebuilt when its migration history no longer fits the code."""
    command = [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"]
    for fresh in (False, True):
        url = _database_url(fresh=fresh)
        done = subprocess.run(
            command, cwd=ROOT, env={**env, "DATABASE_URL": url}, capture_output=True, text=True
        )
        if done.returncode == 0:
            return url
    raise RuntimeError(f"cannot migrate the bench database {DATABASE}:\n{done.stderr[-2000:]}")


@dataclass
class World:
    project_id: str
    agent_id: str
    user_id: int
    session: str
    token: str


def arrange() -> World:
    """A user, a project with a small graph and graph-query-agent, a session cookie and an API token."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from apps.agents.definitions import default_agents_install
    from apps.agents.models import AgentDefinition
    from apps.graph_tools.models import GraphObject, GraphRelationship
    from apps.projects.services import api_token_create, project_create

    tag = uuid.uuid4().hex[:8]
    user = get_user_model().objects.create(username=f"bench-vs-adk-{tag}")
    project = project_create(owner=user, name=f"bench vs adk {tag}")
    nodes = {
        key: GraphObject.objects.create(project=project, key=key, type=kind, name=key.title())
        for key, kind in [("paris", "City"), ("lyon", "City"), ("france", "Country"), ("euro", "Currency")]
    }
    for src, kind, dst in [
        ("paris", "CAPITAL_OF", "france"),
        ("lyon", "LOCATED_IN", "france"),
        ("france", "USES_CURRENCY", "euro"),
    ]:
        GraphRelationship.objects.create(project=project, src=nodes[src], type=kind, dst=nodes[dst])
    default_agents_install(project=project)
    agent = AgentDefinition.objects.get(project=project, name="graph-query-agent")
    client = Client()
    client.force_login(user)
    _, secret = api_token_create(user=user, project=project, name="bench vs adk")
    return World(
        project_id=str(project.id),
        agent_id=str(agent.id),
        user_id=user.id,
        session=client.cookies["sessionid"].value,
        token=secret,
    )


def cleanup(world: World) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.models import Session

    from apps.projects.models import Project

    Project.objects.filter(id=world.project_id).delete()
    Session.objects.filter(session_key=world.session).delete()
    get_user_model().objects.filter(id=world.user_id).delete()


def check_database(conversation_ids: list[str], answers: dict[str, list[str]]) -> list[str]:
    """Every measured kgchat turn is persisted: its four rows, the answer equal to the streamed tokens."""
    from apps.agents.models import AgentRun
    from apps.chat.models import Message

    problems: list[str] = []
    for cid in conversation_ids:
        rows = list(
            Message.objects.filter(conversation_id=cid)
            .order_by("created_at", "id")
            .values_list("role", "content")
        )
        roles = [r for r, _ in rows]
        turns = len(answers[cid])
        if roles != ["user", "assistant", "tool", "assistant"] * turns:
            problems.append(f"conversation {cid}: {len(rows)} rows, expected {4 * turns} in turn order")
            continue
        stored = [content for _, content in rows[3::4]]
        if stored != answers[cid]:
            problems.append(f"conversation {cid}: a stored answer differs from the streamed tokens")
    running = AgentRun.objects.filter(conversation_id__in=conversation_ids, status="running").count()
    if running:
        problems.append(f"{running} runs left running")
    return problems

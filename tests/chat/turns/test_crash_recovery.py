"""Issue #11, red-team findings on crashes (kill -9), with real server processes; since issue #27
an agent turn is resumed rather than interrupted.

- "After kill -9 and a restart, the interrupted run stays ``running``": processes restarting
  together take the dead one's turns over once their lease lapses, each turn by one of them
  (``FOR UPDATE SKIP LOCKED``): the agent turn resumes and finishes, once.
- "A plain (non-agent) turn killed mid-stream loses its streamed text": plain turns save what
  they streamed as they go and are not resumed: the takeover shows it as the interrupted answer.

Process A (daphne, ``config.asgi:application``) runs a plain and an agent turn on slow model
streams and is killed with SIGKILL; processes B and C start together on the same database.
"""

import asyncio
import os
import signal
import socket
import tempfile
import threading
import time

import httpx
import psycopg
import pytest

from apps.agents.definitions import default_agents_install
from apps.agents.models import AgentDefinition, AgentRun
from apps.chat.models import Conversation, Message
from apps.chat.turns.recovery import turns_expired_take
from tests.chat.conftest import adb
from tests.chat.streams.test_multiprocess import (
    WAIT,
    _start,
    _wait_ready,
    one_process_env,
    slow_answer,
    sse_frames,
)
from tests.factories import make_token

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def env(django_db_blocker, llm):
    with django_db_blocker.unblock():
        env = one_process_env(llm.base_url, 3)
    with tempfile.TemporaryDirectory() as logdir:
        yield env, logdir


def _stop(*servers) -> None:
    for server in servers:
        server.stop(15)


async def _first_frames(http: httpx.AsyncClient, url: str, token: str, body: dict, count: int):
    """Start an SSE turn and return its first ``count`` frames, leaving the stream open."""
    request = http.build_request(
        "POST", f"{url}/api/chat/stream", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    response = await http.send(request, stream=True)
    frames = sse_frames(response)
    return response, [await anext(frames) for _ in range(count)]


def _saved(conversation_id: str, run_id: str | None) -> bool:
    if run_id is not None:
        return AgentRun.objects.filter(id=run_id).exclude(final_text="").exists()
    return Conversation.objects.filter(id=conversation_id).exclude(active_turn_text="").exists()


async def test_after_kill_9_restarted_processes_resume_the_agent_turn_and_keep_the_plain_ones_text(
    world, env, llm
):
    environment, logdir = env
    await adb(default_agents_install)(project=world["project"])
    agent = await AgentDefinition.objects.aget(project=world["project"], name="graph-query-agent")
    token = await adb(make_token)(world["user"])
    # The plain turn's answer, the agent's (cut off), the agent's again (in the process resuming it).
    llm.enqueue(slow_answer(600, 0.05), slow_answer(600, 0.05), slow_answer(600, 0))
    a = _start("A", environment, logdir)
    try:
        await asyncio.to_thread(_wait_ready, a)
        async with httpx.AsyncClient(timeout=WAIT) as http:
            plain_response, plain = await _first_frames(
                http, a.http, token, {"message": "Where is Paris?", "projectId": str(world["project"].id)}, 3
            )
            agent_response, agentic = await _first_frames(
                http,
                a.http,
                token,
                {
                    "message": "Where is Paris?",
                    "projectId": str(world["project"].id),
                    "agentDefinitionId": str(agent.id),
                },
                3,
            )
            plain_id, agent_id, run_id = (
                plain[0]["conversationId"],
                agentic[0]["conversationId"],
                agentic[0]["runId"],
            )
            # Both turns go on streaming until each has saved some of its text.
            deadline = time.monotonic() + WAIT
            while not (await adb(_saved)(plain_id, None) and await adb(_saved)(agent_id, run_id)):
                assert time.monotonic() < deadline, "the turns never saved their partial text"
                await asyncio.sleep(0.1)
            os.kill(a.process.pid, signal.SIGKILL)
            a.process.wait(10)  # reaped: its pid no longer names a live process
            await plain_response.aclose()
            await agent_response.aclose()
    finally:
        _stop(a)

    b, c = _start("B", environment, logdir), _start("C", environment, logdir)
    try:
        # B and C start together; each takes over turns once it serves.
        probes = [threading.Thread(target=_wait_ready, args=(server,)) for server in (b, c)]
        for probe in probes:
            probe.start()
        for probe in probes:
            probe.join()
        deadline = time.monotonic() + WAIT
        while await Conversation.objects.filter(active_turn_id__isnull=False).aexists():
            assert time.monotonic() < deadline, "the dead process's turns were never taken over"
            await asyncio.sleep(0.1)
        async with httpx.AsyncClient(timeout=WAIT, headers={"Authorization": f"Bearer {token}"}) as http:
            plain_page = (await http.get(f"{b.http}/api/chat/conversations/{plain_id}")).json()
            agent_page = (await http.get(f"{c.http}/api/chat/conversations/{agent_id}")).json()
            run = (await http.get(f"{b.http}/api/agent-runs/{run_id}")).json()
    finally:
        _stop(b, c)

    streamed_plain = "".join(f"w{i} " for i in range(600))
    plain_answers = [m for m in plain_page["messages"] if m["role"] == "assistant"]
    assert len(plain_answers) == 1
    assert plain_answers[0]["content"] and streamed_plain.startswith(plain_answers[0]["content"])
    assert plain_answers[0]["retrievalContext"]["stop_reason"] == "interrupted"
    agent_answers = [m for m in agent_page["messages"] if m["role"] == "assistant"]
    assert [a["content"] for a in agent_answers] == [streamed_plain]
    assert "stop_reason" not in agent_answers[0]["retrievalContext"]
    assert (run["status"], run["stopReason"]) == ("success", "completed")
    assert await AgentRun.objects.filter(id=run_id, attempts=2).aexists()


def test_a_turn_another_process_is_taking_over_is_skipped_and_its_answer_written_once(world):
    from django.db import connection

    conversation = Conversation.objects.create(project=world["project"], user=world["user"])
    Conversation.objects.filter(id=conversation.id).update(
        active_turn_id=conversation.id,
        active_turn_started_at=conversation.created_at,
        active_turn_worker=f"{socket.gethostname()}:4194303",
        active_turn_text="Half",
        active_turn_lease_until=conversation.created_at,
    )
    s = connection.settings_dict
    other = psycopg.connect(dbname=s["NAME"], user=s["USER"], host=s["HOST"], port=s["PORT"] or None)

    # Another process holds the row while it takes it over: this one skips it instead of waiting.
    other.execute("SELECT 1 FROM kb.chat_conversations WHERE id = %s FOR UPDATE", [conversation.id])
    skipped = turns_expired_take()
    other.rollback()
    other.close()
    taken = turns_expired_take()

    assert skipped == [] and [t.outcome for t in taken] == ["interrupted"]
    assert [m.content for m in Message.objects.filter(conversation=conversation)] == ["Half"]
    assert turns_expired_take() == []

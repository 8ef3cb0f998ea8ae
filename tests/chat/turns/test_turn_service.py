"""The turn service (apps/chat/turns/service.py, claim.py, admission.py): what it admits and refuses, one turn per
conversation (the claim), limits and crash safety (issue 7): rate limit, timeout, result caps,
recovery, failed writes."""

import json
import os
import socket
from datetime import timedelta

import pytest
from django.db import DatabaseError
from django.test import AsyncClient
from django.utils import timezone
from psycopg_pool import PoolTimeout

from apps.agents.llm.scripted import Delay, text, tool_call
from apps.agents.models import AgentRun
from apps.agents.services import worker_is_dead
from apps.agents.tool_results import shrink_result
from apps.chat.models import Conversation, Message
from apps.chat.turns import claim
from apps.chat.turns import service as services
from apps.chat.turns.recovery import interrupted_turns_recover
from apps.chat.turns.service import turn_wait_all
from tests.chat.conftest import adb, agent_request, sse_turn, tokens, types
from tests.factories import make_project, make_user

pytestmark = pytest.mark.django_db(transaction=True)


async def test_turns_over_the_rate_limit_get_429_and_nothing_persisted(world, agent, scripted, settings):
    settings.KGCHAT_TURNS_PER_MINUTE = 2
    scripted.turns += [text("a"), text("b"), text("c")]
    await sse_turn(world["client"], agent_request(world, agent))
    await sse_turn(world["client"], agent_request(world, agent))

    status, body = await sse_turn(world["client"], agent_request(world, agent))

    assert status == 429 and body["code"] == "rate_limited"
    assert await Conversation.objects.acount() == 2
    assert await Message.objects.filter(role="user").acount() == 2


async def test_a_turn_past_its_timeout_ends_with_timeout_and_keeps_what_was_said(
    world, agent, scripted, settings
):
    settings.KGCHAT_TURN_TIMEOUT_SECONDS = 1
    scripted.turns.append([*text("Partial "), Delay(10), *text("never")])

    _, frames = await sse_turn(world["client"], agent_request(world, agent))

    assert types(frames) == ["meta", "token", "error", "done"]
    assert frames[2]["code"] == "timeout"
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert answer.content == tokens(frames) == "Partial "
    assert answer.retrieval_context["stop_reason"] == "timeout"
    run = await AgentRun.objects.aget(id=frames[0]["runId"])
    assert (run.status, run.stop_reason) == ("error", "timeout")


async def test_plain_turn_timeout_without_text_writes_no_answer(world, scripted, settings):
    settings.KGCHAT_TURN_TIMEOUT_SECONDS = 1
    scripted.turns.append([Delay(10), *text("never")])

    _, frames = await sse_turn(world["client"], {"message": "hi", "projectId": str(world["project"].id)})

    assert types(frames) == ["meta", "error", "done"]
    assert frames[1]["code"] == "timeout" and frames[2]["messageId"] is None


async def test_a_failed_database_write_ends_the_turn_with_an_error_and_no_half_written_turn(
    world, agent, scripted, monkeypatch
):
    scripted.turns += [[tool_call("hybrid_search", {"query": "Paris"}, id="x")], text("answer")]
    original = services.rows_write

    def failing_write(**kwargs):
        if any(getattr(row, "role", None) == "assistant" for row in kwargs.get("inserts", ())):
            raise DatabaseError("disk full")
        return original(**kwargs)

    monkeypatch.setattr(services, "rows_write", failing_write)

    _, frames = await sse_turn(world["client"], agent_request(world, agent))

    assert types(frames)[-2:] == ["error", "done"]
    assert frames[-2]["code"] == "internal_error" and frames[-1]["messageId"] is None
    roles = [m.role async for m in Message.objects.filter(conversation_id=frames[0]["conversationId"])]
    assert roles == ["user"]
    conversation = await Conversation.objects.aget(id=frames[0]["conversationId"])
    assert conversation.active_turn_id is None


def test_large_tool_results_are_shrunk_for_the_model():
    result = {"results": [{"id": str(i), "name": "x" * 100} for i in range(1000)], "total": 1000}

    shrunk = shrink_result(result, max_chars=5_000)

    assert shrunk["truncated"] is True and shrunk["total"] == 1000
    assert 0 < len(shrunk["results"]) < 1000
    assert len(json.dumps(shrunk)) <= 5_000
    assert shrink_result({"a": 1}, max_chars=5_000) == {"a": 1}


def test_worker_liveness():
    me = f"{socket.gethostname()}:{os.getpid()}"
    now = timezone.now()

    assert not worker_is_dead(me, now)
    assert worker_is_dead(f"{socket.gethostname()}:4194303", now)
    assert not worker_is_dead("other-host:1", now)
    assert worker_is_dead("other-host:1", now - timedelta(hours=1))


def test_batch_runs_of_a_dead_process_are_marked_interrupted(world, agent):
    dead = f"{socket.gethostname()}:4194303"
    orphan = AgentRun.objects.create(
        project=world["project"], agent_definition=agent, worker=dead, final_text="Half an ans"
    )
    alive = AgentRun.objects.create(
        project=world["project"], agent_definition=agent, worker=f"{socket.gethostname()}:{os.getpid()}"
    )
    # A chat turn's run is not closed here: its lease lapses and a process resumes it.
    conversation = Conversation.objects.create(project=world["project"], user=world["user"])
    chat_run = AgentRun.objects.create(
        project=world["project"], agent_definition=agent, conversation_id=conversation.id, worker=dead
    )

    closed = interrupted_turns_recover()

    orphan.refresh_from_db()
    alive.refresh_from_db()
    chat_run.refresh_from_db()
    assert closed == 1
    assert (orphan.status, orphan.stop_reason) == ("interrupted", "interrupted") and orphan.completed_at
    assert alive.status == "running" and chat_run.status == "running"
    assert interrupted_turns_recover() == 0


async def test_a_stale_claim_does_not_block_the_conversation_forever(world, scripted):
    scripted.turns += [text("first"), text("second")]
    _, frames = await sse_turn(world["client"], {"message": "hi", "projectId": str(world["project"].id)})
    conversation_id = frames[0]["conversationId"]
    await Conversation.objects.filter(id=conversation_id).aupdate(
        active_turn_id=frames[0]["messageId"],
        active_turn_started_at=timezone.now() - timedelta(hours=1),
        active_turn_worker="gone-host:1",
        active_turn_lease_until=timezone.now() - timedelta(hours=1),
    )

    status, again = await sse_turn(world["client"], {"message": "again", "conversationId": conversation_id})

    assert status == 200 and tokens(again) == "second"


async def test_sse_client_disconnect_does_not_lose_the_turn(world, agent, scripted):
    scripted.turns.append([*text("one "), Delay(0.3), *text("two")])
    response = await world["client"].post(
        "/api/chat/stream", agent_request(world, agent), content_type="application/json"
    )
    stream = response.streaming_content.__aiter__()
    first = await stream.__anext__()
    await stream.aclose()
    from apps.chat.turns.service import turn_wait_all

    await turn_wait_all()

    conversation_id = __import__("json").loads(first.decode().split("data: ", 1)[1])["conversationId"]
    contents = [
        m.content
        async for m in Message.objects.filter(conversation_id=conversation_id).order_by("created_at")
    ]
    assert contents[-1] == "one two"


async def test_cancel_while_a_tool_runs_stores_every_call_with_its_answer(
    world, agent, scripted, monkeypatch
):
    import asyncio
    import dataclasses

    from apps.chat.turns.service import turn_cancel
    from apps.graph_tools import registry
    from apps.projects.selectors import Principal

    started = asyncio.Event()

    async def slow(ctx, args):
        started.set()
        await asyncio.sleep(10)
        return {"types": []}

    tool = registry.tool_get("list_entity_types")
    monkeypatch.setitem(registry._REGISTRY, "list_entity_types", dataclasses.replace(tool, handler=slow))
    scripted.turns += [[*text("Looking. "), tool_call("list_entity_types", {}, id="slow-1")], text("never")]
    response = await world["client"].post(
        "/api/chat/stream", agent_request(world, agent), content_type="application/json"
    )
    stream = response.streaming_content.__aiter__()
    first = await stream.__anext__()
    conversation_id = __import__("json").loads(first.decode().split("data: ", 1)[1])["conversationId"]

    await asyncio.wait_for(started.wait(), 10)
    await turn_cancel(principal=Principal(user=world["user"]), conversation_id=conversation_id)
    rest = [chunk async for chunk in stream]

    assert b'"code": "cancelled"' in b"".join(rest)
    rows = [m async for m in Message.objects.filter(conversation_id=conversation_id).order_by("created_at")]
    asked = {c["id"] for m in rows if m.role == "assistant" for c in m.tool_calls}
    answered = {c["id"]: c for m in rows if m.role == "tool" for c in m.tool_calls}
    assert [m.role for m in rows] == ["user", "assistant", "tool", "assistant"]
    assert asked == set(answered) == {"slow-1"}
    assert "aborted" in answered["slow-1"]["error"]
    assert rows[-1].content == "Looking. " and rows[-1].retrieval_context["stop_reason"] == "cancelled"


def test_a_tool_call_nothing_answered_is_not_stored():
    from types import SimpleNamespace

    from apps.agents.history import HistoryMessage, HistoryToolCall
    from apps.chat.turns.agent_turn import _chat_rows

    done = HistoryToolCall(id="a", name="hybrid_search", input={"query": "x"})
    lost = HistoryToolCall(id="b", name="get_entity_edges", input={"entity_id": "y"})
    messages = [
        HistoryMessage(role="assistant", tool_calls=[done, lost]),
        HistoryMessage(role="tool", content="{}", tool_calls=[HistoryToolCall(id="a", name="hybrid_search")]),
    ]

    rows = _chat_rows(SimpleNamespace(conversation=None), messages)

    assert [(r.role, [c["id"] for c in r.tool_calls]) for r in rows] == [
        ("assistant", ["a"]),
        ("tool", ["a"]),
    ]


# --- admission and the claim ---------------------------------------------------------------


async def test_frames_carry_increasing_seq(world, scripted):
    scripted.turns.append(text("a", "b", "c"))

    _, frames = await sse_turn(world["client"], {"message": "hi", "projectId": str(world["project"].id)})

    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))


@pytest.mark.parametrize("message", ["", "   ", None, 42])
async def test_empty_or_invalid_message_is_400_and_nothing_persisted(world, scripted, message):
    status, body = await sse_turn(
        world["client"], {"message": message, "projectId": str(world["project"].id)}
    )

    assert status == 400
    assert body["code"] == "invalid_request"
    assert not await Conversation.objects.aexists()


async def test_over_long_message_is_400_and_nothing_persisted(world, scripted, settings):
    settings.KGCHAT_MAX_MESSAGE_CHARS = 10

    status, body = await sse_turn(
        world["client"], {"message": "x" * 11, "projectId": str(world["project"].id)}
    )

    assert status == 400
    assert body["code"] == "message_too_long"
    assert not await Conversation.objects.aexists()


async def test_conversation_not_found_for_someone_elses_conversation(world, scripted):
    scripted.turns.append(text("mine"))
    _, frames = await sse_turn(world["client"], {"message": "hi", "projectId": str(world["project"].id)})
    stranger = await adb(make_user)()
    other = AsyncClient()
    await adb(other.force_login)(stranger)

    status, body = await sse_turn(
        other, {"message": "let me in", "conversationId": frames[0]["conversationId"]}
    )

    assert status == 404
    assert body["code"] == "conversation_not_found"
    assert await Message.objects.filter(conversation_id=frames[0]["conversationId"]).acount() == 2


async def test_project_of_someone_else_is_404(world, scripted):
    foreign = await adb(make_project)()

    status, _body = await sse_turn(world["client"], {"message": "hi", "projectId": str(foreign.id)})

    assert status == 404
    assert not await Conversation.objects.aexists()


async def test_unauthenticated_stream_is_401():
    status, _body = await sse_turn(AsyncClient(), {"message": "hi", "projectId": "x"})

    assert status == 401


async def test_second_message_while_a_turn_runs_is_refused_and_not_lost(world, scripted):
    scripted.turns += [[Delay(0.5), *text("slow")], text("next")]
    client = world["client"]
    first = await client.post(
        "/api/chat/stream",
        {"message": "one", "projectId": str(world["project"].id)},
        content_type="application/json",
    )
    stream = first.streaming_content.__aiter__()
    meta = await stream.__anext__()
    conversation_id = json.loads(meta.decode().split("data: ", 1)[1])["conversationId"]

    status, body = await sse_turn(client, {"message": "two", "conversationId": conversation_id})
    rest = [chunk async for chunk in stream]
    await turn_wait_all()
    status_after, frames_after = await sse_turn(client, {"message": "two", "conversationId": conversation_id})

    assert status == 409 and body["code"] == "turn_in_progress"
    assert rest
    assert status_after == 200 and tokens(frames_after) == "next"
    contents = [
        m.content
        async for m in Message.objects.filter(conversation_id=conversation_id).order_by("created_at")
    ]
    assert contents == ["one", "slow", "two", "next"]


async def test_the_claim_is_released_when_the_database_was_busy_for_the_answer_and_the_first_release(
    world, scripted, monkeypatch
):
    scripted.turns += [text("lost answer"), text("next")]
    attempts: list[str] = []
    release, write = claim.claim_release, services.rows_write

    def busy_for_the_answer(**kwargs):
        if any(getattr(row, "role", None) == "assistant" for row in kwargs.get("inserts", ())):
            attempts.append("busy")
            raise PoolTimeout("couldn't get a connection after 2.00 sec")
        return write(**kwargs)

    def busy_once(conversation_id, turn_id):
        attempts.append("busy" if len(attempts) < 2 else "released")
        if len(attempts) <= 2:
            raise PoolTimeout("couldn't get a connection after 2.00 sec")
        release(conversation_id, turn_id)

    monkeypatch.setattr(services, "rows_write", busy_for_the_answer)
    monkeypatch.setattr(claim, "claim_release", busy_once)

    _, frames = await sse_turn(world["client"], {"message": "hi", "projectId": str(world["project"].id)})
    monkeypatch.setattr(claim, "claim_release", release)
    monkeypatch.setattr(services, "rows_write", write)
    status, after = await sse_turn(
        world["client"], {"message": "again", "conversationId": frames[0]["conversationId"]}
    )

    assert attempts == ["busy", "busy", "released"]
    assert types(frames)[-2:] == ["error", "done"] and frames[-2]["code"] == "database_busy"
    assert frames[-1]["messageId"] is None
    assert status == 200 and tokens(after) == "next"
    contents = [
        m.content
        async for m in Message.objects.filter(conversation_id=frames[0]["conversationId"]).order_by(
            "created_at"
        )
    ]
    assert contents == ["hi", "again", "next"]


async def test_the_run_opened_with_the_turn_is_closed_when_the_turn_fails_before_its_agent_runs(
    world, agent, scripted, monkeypatch
):
    async def broken_branch(turn, provider):
        raise RuntimeError("the agent branch could not start")

    monkeypatch.setattr(services, "run_agent_turn", broken_branch)

    _, frames = await sse_turn(world["client"], agent_request(world, agent))
    await turn_wait_all()

    assert types(frames) == ["meta", "error", "done"] and frames[1]["code"] == "internal_error"
    run = await AgentRun.objects.aget(id=frames[0]["runId"])
    assert (run.status, run.stop_reason) == ("error", "internal_error")
    conversation = await Conversation.objects.aget(id=frames[0]["conversationId"])
    assert conversation.active_turn_id is None

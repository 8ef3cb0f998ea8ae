"""A decision reaches every tab watching the conversation (issue 15 follow-up): the decider's,
another tab of the owner, the owner's tabs when an editor decided, and tabs in another process."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.test import AsyncClient
from django.utils import timezone

from apps.agents.llm.scripted import text
from apps.agents.models import AgentDefinition
from apps.chat.models import Message
from apps.chat.streams.bus import set_bus
from apps.chat.streams.redis_bus import RedisFrameBus
from apps.chat.turns import approval_events
from apps.chat.turns import service as services
from apps.graph_tools.models import WriteApproval
from tests.chat.conftest import adb, agent_request, sse_turn, tokens, types, ws_connect, ws_turn
from tests.chat.turns.test_approval_turns import decide, paused_turn, rename_script
from tests.factories import add_member, make_user
from tests.support.redis_server import redis_server

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def curator(world):
    from apps.agents.definitions import default_agents_install

    default_agents_install(project=world["project"])
    return AgentDefinition.objects.get(project=world["project"], name="graph-curator-agent")


@pytest.fixture
def redis_bus():
    with redis_server() as url:
        set_bus(RedisFrameBus(url))
        yield url


async def watching_tab(user, conversation_id):
    """A socket of ``user`` that subscribed to the conversation, known to be watching it: the
    consumer handles messages in order, so the answer to the ``chat.cancel`` sent after the
    subscription (no turn runs: ``not_running``) means the subscription is in place."""
    ws = await ws_connect(user)
    await ws.send_json_to({"type": "chat.subscribe", "conversationId": conversation_id})
    barrier = await ws_turn(ws, {"type": "chat.cancel", "conversationId": conversation_id})
    assert barrier[-1]["code"] == "not_running"
    return ws


async def frames_until_done(ws):
    frames = []
    while not frames or frames[-1]["type"] != "done":
        frames.append(await ws.receive_json_from(timeout=10))
    return frames


async def test_approval_in_one_tab_updates_the_other_tab_and_it_follows_the_continuation(
    world, curator, scripted
):
    paused = await paused_turn(world, curator, scripted, text("Renamed to Paris, France."))
    conversation_id, approval_id = paused[0]["conversationId"], paused[3]["approvalId"]
    watcher = await watching_tab(world["user"], conversation_id)
    decider = await watching_tab(world["user"], conversation_id)

    answered = await ws_turn(
        decider, {"type": "chat.approval", "approvalId": approval_id, "decision": "approve"}
    )
    seen = await frames_until_done(watcher)

    event = seen[0]
    assert event == {
        "type": "approval_decided",
        "approvalId": approval_id,
        "conversationId": conversation_id,
        "callId": "call-w",
        "status": "approved",
        "decidedBy": "carol",
        "reason": "",
        "result": event["result"],
        "continued": True,
    }
    assert event["result"]["changed"] is True
    assert types(seen[1:])[0] == "meta" and tokens(seen[1:]) == "Renamed to Paris, France."
    assert types(answered).count("approval_decided") == 1 and answered[0] == event
    assert await watcher.receive_nothing(timeout=0.2)
    await watcher.disconnect()
    await decider.disconnect()


async def test_editor_rejecting_over_rest_updates_the_owners_tab_with_who_and_why(world, curator, scripted):
    viewer = await adb(make_user)("vera")
    await adb(add_member)(world["project"], viewer, "viewer")
    client = AsyncClient()
    await adb(client.force_login)(viewer)
    rename_script(scripted, text("Understood, I left it."))
    _, paused = await sse_turn(client, agent_request(world, curator, "Rename Paris"))
    watcher = await watching_tab(viewer, paused[0]["conversationId"])

    status, _ = await decide(world["client"], paused[3]["approvalId"], "reject", "keep the old name")
    seen = await frames_until_done(watcher)

    assert status == 200
    event = seen[0]
    assert (event["type"], event["status"], event["decidedBy"], event["reason"]) == (
        "approval_decided",
        "rejected",
        "carol",
        "keep the old name",
    )
    assert event["result"]["code"] == "approval_rejected" and "seq" not in event
    assert tokens(seen[1:]) == "Understood, I left it."
    await watcher.disconnect()


async def test_approval_found_expired_is_announced_to_every_tab_once(world, curator, scripted):
    paused = await paused_turn(world, curator, scripted)
    conversation_id, approval_id = paused[0]["conversationId"], paused[3]["approvalId"]
    await WriteApproval.objects.filter(id=approval_id).aupdate(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    watcher = await watching_tab(world["user"], conversation_id)
    decider = await ws_connect(world["user"])

    refused = await ws_turn(
        decider, {"type": "chat.approval", "approvalId": approval_id, "decision": "approve"}
    )
    again = await ws_turn(
        decider, {"type": "chat.approval", "approvalId": approval_id, "decision": "approve"}
    )
    event = await watcher.receive_json_from(timeout=10)

    assert refused[-1]["code"] == "approval_not_pending" and again[-1]["code"] == "approval_not_pending"
    assert (event["status"], event["decidedBy"], event["continued"]) == ("expired", None, False)
    assert event["result"]["code"] == "approval_expired"
    assert await watcher.receive_nothing(timeout=0.2)
    await services.turn_wait_all()
    await watcher.disconnect()
    await decider.disconnect()


async def test_decision_reaches_a_tab_of_another_process_through_redis(world, curator, scripted, redis_bus):
    paused = await paused_turn(world, curator, scripted, text("Renamed."))
    conversation_id, approval_id = paused[0]["conversationId"], paused[3]["approvalId"]
    other_process = RedisFrameBus(redis_bus)
    watch = await other_process.watch(conversation_id)

    status, _ = await decide(world["client"], approval_id, "approve")
    event = await asyncio.wait_for(anext(watch), timeout=10)
    turn = [f.type async for f in other_process.subscribe(conversation_id, include_finished=True)]
    await watch.aclose()

    assert status == 200
    assert (event.approvalId, event.status, event.decidedBy, event.continued) == (
        approval_id,
        "approved",
        "carol",
        True,
    )
    assert turn[0] == "meta" and turn[-1] == "done"


async def test_approval_closed_as_expired_by_a_new_message_is_announced_to_the_other_tab(
    world, curator, scripted
):
    paused = await paused_turn(world, curator, scripted, text("On to the next question."))
    conversation_id, approval_id = paused[0]["conversationId"], paused[3]["approvalId"]
    await WriteApproval.objects.filter(id=approval_id).aupdate(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    watcher = await watching_tab(world["user"], conversation_id)
    sender = await ws_connect(world["user"])

    sent = await ws_turn(
        sender, {"type": "chat.message", "conversationId": conversation_id, "message": "Next?"}
    )
    event = await watcher.receive_json_from(timeout=10)

    assert tokens(sent) == "On to the next question."
    assert (event["type"], event["approvalId"], event["status"]) == (
        "approval_decided",
        approval_id,
        "expired",
    )
    await watcher.disconnect()
    await sender.disconnect()


async def test_approval_left_alone_is_announced_expired_when_it_expires(
    world, curator, scripted, settings, monkeypatch
):
    # Nobody decides and nobody writes to the conversation: the process that paused the turn closes
    # the approval when it expires and every watching tab is told, without a reload or a message.
    settings.KGCHAT_APPROVAL_TTL_MINUTES = 0
    monkeypatch.setattr(approval_events, "APPROVAL_EXPIRY_GRACE_SECONDS", 0.5)
    paused = await paused_turn(world, curator, scripted)
    conversation_id, approval_id = paused[0]["conversationId"], paused[3]["approvalId"]
    watcher = await watching_tab(world["user"], conversation_id)

    event = await watcher.receive_json_from(timeout=10)

    assert (event["approvalId"], event["status"], event["continued"]) == (approval_id, "expired", False)
    assert event["result"]["code"] == "approval_expired"
    ended = await last_stop_reason(conversation_id)
    assert ended == "approval_expired"
    await watcher.disconnect()


async def last_stop_reason(conversation_id: str) -> str | None:
    last = await Message.objects.filter(conversation_id=conversation_id, role="assistant").alast()
    return (last.retrieval_context or {}).get("stop_reason") if last else None

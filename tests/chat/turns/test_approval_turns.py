"""Approval in the chat (issue 15 part B): a write tool call pauses the turn, a decision continues it."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from django.test import AsyncClient
from django.utils import timezone

from apps.agents.llm.scripted import text, tool_call
from apps.agents.models import AgentDefinition, AgentRun
from apps.chat.models import Conversation, Message
from apps.chat.streams.bus import InProcessFrameBus, set_bus
from apps.chat.turns import recovery
from apps.chat.turns import service as services
from apps.graph_tools.models import GraphChange, GraphObject, WriteApproval
from apps.graph_tools.versions import graph_version_current
from tests.chat.conftest import adb, agent_request, sse_turn, tokens, types, ws_connect, ws_turn
from tests.factories import add_member, make_user

pytestmark = pytest.mark.django_db(transaction=True)

RENAME = {"entity_id": "paris", "name": "Paris, France"}


@pytest.fixture
def curator(world):
    from apps.agents.definitions import default_agents_install

    default_agents_install(project=world["project"])
    return AgentDefinition.objects.get(project=world["project"], name="graph-curator-agent")


def rename_script(scripted, *after):
    """The model proposes renaming Paris, then (in the continuation) answers with ``after``."""
    scripted.turns += [
        [text("I will rename it. ")[0], tool_call("update_entity", RENAME, id="call-w")],
        *after,
    ]


async def paused_turn(world, curator, scripted, *after):
    rename_script(scripted, *after)
    status, frames = await sse_turn(world["client"], agent_request(world, curator, "Rename Paris"))
    assert status == 200
    return frames


def tool_results_seen_by_model(call) -> list[str]:
    return [m.content for m in call.messages if m.role == "tool"]


async def decide(client, approval_id, decision, reason=None):
    body = {"decision": decision} | ({"reason": reason} if reason is not None else {})
    response = await client.post(
        f"/api/approvals/{approval_id}/decision", body, content_type="application/json"
    )
    await services.turn_wait_all()
    return response.status_code, json.loads(response.content)


async def test_write_tool_call_pauses_turn_with_approval_required_frame_and_writes_nothing(
    world, curator, scripted
):
    frames = await paused_turn(world, curator, scripted)

    assert types(frames) == ["meta", "token", "mcp_tool", "approval_required", "done"]
    card = frames[3]
    approval = await WriteApproval.objects.aget(id=card["approvalId"])
    assert (card["tool"], card["callId"], card["arguments"], card["canDecide"]) == (
        "update_entity",
        "call-w",
        RENAME,
        True,
    )
    assert card["diff"]["changes"] == [{"field": "name", "before": "Paris", "after": "Paris, France"}]
    assert approval.status == "pending" and str(approval.conversation_id) == frames[0]["conversationId"]
    assert (await GraphObject.objects.aget(id=world["paris"].id)).name == "Paris"
    assert await graph_version_current_async(world) == 0
    paused = await Message.objects.aget(id=frames[-1]["messageId"])
    assert paused.content == "I will rename it. "
    assert paused.retrieval_context["stop_reason"] == "approval_required"
    assert [c["id"] for c in paused.tool_calls] == ["call-w"]
    run = await AgentRun.objects.aget(id=frames[0]["runId"])
    assert (run.status, run.stop_reason) == ("success", "approval_required")


async def graph_version_current_async(world) -> int:
    return await adb(graph_version_current)(project_id=world["project"].id)


async def test_approve_applies_write_and_answer_continues(world, curator, scripted):
    frames = await paused_turn(world, curator, scripted, text("Renamed to Paris, France."))
    approval_id = frames[3]["approvalId"]
    ws = await ws_connect(world["user"])

    continuation = await ws_turn(
        ws, {"type": "chat.approval", "approvalId": approval_id, "decision": "approve"}
    )

    assert continuation[0]["type"] == "approval_decided" and continuation[0]["status"] == "approved"
    turn = continuation[1:]
    assert types(turn)[0] == "meta" and types(turn)[-1] == "done"
    assert [(f["callId"], f["status"]) for f in turn if f["type"] == "mcp_tool"] == [("call-w", "completed")]
    assert tokens(turn) == "Renamed to Paris, France."
    assert (await GraphObject.objects.aget(id=world["paris"].id)).name == "Paris, France"
    change = await GraphChange.objects.aget(entity_id=world["paris"].id, action="update_entity")
    assert (change.user_id, str(change.approval_id), str(change.run_id)) == (
        world["user"].id,
        approval_id,
        frames[0]["runId"],
    )
    told = tool_results_seen_by_model(scripted.calls[-1])
    assert '"changed": true' in told[-1]
    answer = await Message.objects.aget(id=turn[-1]["messageId"])
    assert answer.content == "Renamed to Paris, France."
    await ws.disconnect()


async def test_reject_writes_nothing_and_model_is_told_the_reason(world, curator, scripted):
    frames = await paused_turn(world, curator, scripted, text("Understood, I left it."))

    status, body = await decide(world["client"], frames[3]["approvalId"], "reject", "wrong city")

    assert status == 200 and body["approval"]["status"] == "rejected" and body["continued"] is True
    assert (await GraphObject.objects.aget(id=world["paris"].id)).name == "Paris"
    assert not await GraphChange.objects.aexists()
    told = tool_results_seen_by_model(scripted.calls[-1])[-1]
    assert "declined" in told and "wrong city" in told
    messages = [m async for m in Message.objects.filter(conversation_id=frames[0]["conversationId"])]
    assert messages[-1].content == "Understood, I left it."


async def test_second_decision_and_unknown_approval_are_clear_errors(world, curator, scripted):
    frames = await paused_turn(world, curator, scripted, text("Done."))
    approval_id = frames[3]["approvalId"]
    await decide(world["client"], approval_id, "approve")

    second = await decide(world["client"], approval_id, "reject")
    unknown = await decide(world["client"], "00000000-0000-0000-0000-000000000000", "approve")
    bad = await decide(world["client"], approval_id, "maybe")

    assert second == (409, second[1]) and second[1]["code"] == "approval_not_pending"
    assert unknown[0] == 404 and unknown[1]["code"] == "approval_not_found"
    assert bad[0] == 400 and bad[1]["code"] == "invalid_request"
    assert await GraphChange.objects.acount() == 1


async def test_new_message_while_approval_pending_is_409_and_stores_nothing(world, curator, scripted):
    frames = await paused_turn(world, curator, scripted)
    before = await Message.objects.acount()

    status, body = await sse_turn(
        world["client"], {"message": "hello?", "conversationId": frames[0]["conversationId"]}
    )

    assert status == 409 and body["code"] == "approval_pending"
    assert await Message.objects.acount() == before


async def test_viewer_conversation_gets_card_but_cannot_approve(world, curator, scripted):
    viewer = await adb(make_user)("vic")
    await adb(add_member)(world["project"], viewer, "viewer")
    client = AsyncClient()
    await adb(client.force_login)(viewer)
    rename_script(scripted)

    _, frames = await sse_turn(client, agent_request(world, curator, "Rename Paris"))
    status, body = await decide(client, frames[3]["approvalId"], "approve")
    ws = await ws_connect(viewer)
    refused = await ws_turn(
        ws, {"type": "chat.approval", "approvalId": frames[3]["approvalId"], "decision": "approve"}
    )

    assert frames[3]["type"] == "approval_required" and frames[3]["canDecide"] is False
    assert status == 403 and body["code"] == "forbidden"
    assert refused == [{"type": "error", "error": refused[0]["error"], "code": "forbidden"}]
    assert (await WriteApproval.objects.aget(id=frames[3]["approvalId"])).status == "pending"
    assert (await GraphObject.objects.aget(id=world["paris"].id)).name == "Paris"
    await ws.disconnect()


async def test_editor_approves_a_viewers_proposal_and_the_viewers_conversation_continues(
    world, curator, scripted
):
    viewer = await adb(make_user)("vera")
    await adb(add_member)(world["project"], viewer, "viewer")
    client = AsyncClient()
    await adb(client.force_login)(viewer)
    rename_script(scripted, text("The editor approved it."))
    _, frames = await sse_turn(client, agent_request(world, curator, "Rename Paris"))

    status, body = await decide(world["client"], frames[3]["approvalId"], "approve")

    assert status == 200 and body["continued"] is True
    last = await Message.objects.filter(conversation_id=frames[0]["conversationId"]).alast()
    assert last.content == "The editor approved it."
    change = await GraphChange.objects.aget(action="update_entity")
    assert change.user_id == world["user"].id


async def test_expired_approval_is_refused_and_the_paused_turn_ends_with_approval_expired(
    world, curator, scripted
):
    frames = await paused_turn(world, curator, scripted, text("Next question answered."))
    approval_id = frames[3]["approvalId"]
    await WriteApproval.objects.filter(id=approval_id).aupdate(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    status, body = await decide(world["client"], approval_id, "approve")
    next_status, next_frames = await sse_turn(
        world["client"], {"message": "anything else?", "conversationId": frames[0]["conversationId"]}
    )

    assert status == 409 and body["code"] == "approval_not_pending"
    assert (await WriteApproval.objects.aget(id=approval_id)).status == "expired"
    assert (await GraphObject.objects.aget(id=world["paris"].id)).name == "Paris"
    ended = await Message.objects.aget(retrieval_context__stop_reason="approval_expired")
    assert ended.retrieval_context["approval_id"] == approval_id
    assert next_status == 200 and tokens(next_frames) == "Next question answered."
    told = tool_results_seen_by_model(scripted.calls[-1])
    assert any("approval_expired" in t for t in told)


async def test_restart_while_pending_then_approve_continues_from_stored_state(world, curator, scripted):
    frames = await paused_turn(world, curator, scripted, text("Renamed after the restart."))
    # A restart: a fresh frame bus, and recovery as a new process runs it before serving.
    set_bus(InProcessFrameBus())
    await adb(recovery.interrupted_turns_recover)()
    conversation = await Conversation.objects.aget(id=frames[0]["conversationId"])

    status, body = await decide(world["client"], frames[3]["approvalId"], "approve")

    assert conversation.active_turn_id is None
    assert status == 200 and body["continued"] is True
    assert (await GraphObject.objects.aget(id=world["paris"].id)).name == "Paris, France"
    last = await Message.objects.filter(conversation_id=conversation.id).alast()
    assert last.content == "Renamed after the restart."
    first_run = await AgentRun.objects.aget(id=frames[0]["runId"])
    assert first_run.status == "success"


async def test_reload_shows_the_pending_card_from_rest(world, curator, scripted):
    frames = await paused_turn(world, curator, scripted)

    response = await world["client"].get(f"/api/chat/conversations/{frames[0]['conversationId']}")
    approval = await world["client"].get(f"/api/approvals/{frames[3]['approvalId']}")

    body = json.loads(response.content)
    assert [a["id"] for a in body["pendingApprovals"]] == [frames[3]["approvalId"]]
    assert body["pendingApprovals"][0]["diff"] == frames[3]["diff"]
    assert json.loads(approval.content)["canDecide"] is True


def _decided_by_a_process_that_died(world, approval_id: str, *, seconds_ago: float) -> WriteApproval:
    """What a process that died right after the user's approve leaves: the decision committed (the
    write done, under its idempotency key), no turn claimed to continue it; ``seconds_ago``."""
    from apps.graph_tools import services as graph_services
    from apps.projects.selectors import Principal

    approval = graph_services.approval_decide(
        principal=Principal(user=world["user"]), approval_id=approval_id, approve=True
    )
    _decided_ago(approval, seconds_ago)
    return approval


def _decided_ago(approval: WriteApproval, seconds: float) -> None:
    """Move the decision ``seconds`` into the past, and the paused turn's run before it."""
    decided_at = timezone.now() - timedelta(seconds=seconds)
    WriteApproval.objects.filter(id=approval.id).update(decided_at=decided_at)
    AgentRun.objects.filter(id=approval.run_id).update(started_at=decided_at - timedelta(seconds=1))


async def test_an_approval_whose_continuation_never_started_is_continued_by_a_takeover(
    world, curator, scripted, settings
):
    frames = await paused_turn(world, curator, scripted, text("Renamed after all."))
    conversation_id = frames[0]["conversationId"]
    lease = settings.KGCHAT_TURN_LEASE_SECONDS
    approval = await adb(_decided_by_a_process_that_died)(
        world, frames[3]["approvalId"], seconds_ago=lease / 2
    )
    set_bus(InProcessFrameBus())  # the process that serves now
    watch = await services.get_bus().watch(conversation_id)

    # Decided less than a lease ago: its own process may still be claiming the turn.
    assert await services.turns_take_over() == 0
    await adb(_decided_ago)(approval, lease + 1)
    assert await services.turns_take_over() == 1
    await services.turn_wait_all()
    announced = await asyncio.wait_for(anext(aiter(watch)), 5)
    await watch.aclose()

    assert (announced.status, announced.continued) == ("approved", True)
    answer = await Message.objects.filter(conversation_id=conversation_id).alast()
    assert answer.content == "Renamed after all."
    # The agent was told the write's result; the write was done once, by the decision.
    assert '"changed": true' in tool_results_seen_by_model(scripted.calls[-1])[-1]
    assert (await GraphObject.objects.aget(id=world["paris"].id)).name == "Paris, France"
    assert await GraphChange.objects.filter(action="update_entity").acount() == 1
    continued = await AgentRun.objects.filter(conversation_id=conversation_id).order_by("started_at").alast()
    assert (continued.status, str(continued.id) != frames[0]["runId"]) == ("success", True)
    assert await services.turns_take_over() == 0  # continued once


async def test_a_continuation_that_ran_and_failed_is_not_started_again(world, curator, scripted, settings):
    frames = await paused_turn(world, curator, scripted)
    lease = settings.KGCHAT_TURN_LEASE_SECONDS
    await adb(_decided_by_a_process_that_died)(world, frames[3]["approvalId"], seconds_ago=lease + 1)
    # Its continuation ran (a run after the decision) and stored nothing: the model failed.
    await AgentRun.objects.acreate(
        project=world["project"], conversation_id=frames[0]["conversationId"], status="error"
    )

    assert await services.turns_take_over() == 0

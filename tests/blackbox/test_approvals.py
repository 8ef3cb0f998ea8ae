"""An agent proposing a graph write (docs/protocol.md §3 ``approval_required``, §2 approvals,
§4 ``chat.approval`` and ``approval_decided``): approved over REST, rejected over the websocket."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from tests.blackbox.clients import socket
from tests.blackbox.covers import covers
from tests.blackbox.shapes import Turn
from tests.blackbox.world import GRAPH, World

APPROVAL = "/api/approvals/{approval_id}"
DECISION = "POST /api/approvals/{approval_id}/decision"
ENTITY = "GET /api/projects/{project_id}/graph/entities/{id_or_key}"


@dataclass
class Workshop:
    """ada's project where agents write: bob edits, cy views."""

    project_id: str
    curator: str


@pytest.fixture(scope="module")
def workshop(world: World) -> Workshop:
    ada = world.api("ada")
    project = world.new_project("Workshop", graph=GRAPH)
    ada.call("POST /api/admin/projects/{project_id}/install-default-agents", 200, project_id=project)
    agents = ada.call("GET /api/projects/{project_id}/agent-definitions", 200, project_id=project).json()[
        "items"
    ]
    return Workshop(
        project_id=project, curator=next(a["id"] for a in agents if a["name"] == "graph-curator-agent")
    )


def proposal(key: str, name: str) -> str:
    return (
        f"#tool create_entity {json.dumps({'key': key, 'type': 'Person', 'name': name})}\nPlease add {name}."
    )


def assert_paused_for_approval(turn: Turn) -> dict[str, Any]:
    assert [f["type"] for f in turn.frames if f["type"] != "token"] == [
        "meta",
        "mcp_tool",
        "approval_required",
        "done",
    ]
    started, waiting = turn.of_type("mcp_tool")[0], turn.of_type("approval_required")[0]
    assert (started["tool"], started["status"], waiting["tool"], waiting["callId"]) == (
        "create_entity",
        "started",
        "create_entity",
        started["callId"],
    )
    assert waiting["canDecide"] is True and waiting["diff"]["after"]["name"]
    assert turn.done["messageId"] is not None
    return waiting


@covers("GET /api/approvals/{approval_id}", "200", "404 approval_not_found")
@covers(
    "POST /api/approvals/{approval_id}/decision",
    "200",
    "403 forbidden",
    "400 invalid_request",
    "400 invalid_reason",
    "409 approval_not_pending",
    "404 approval_not_found",
)
@covers("POST /api/chat/stream", "409 approval_pending")
async def test_a_write_the_agent_proposed_waits_and_an_approval_over_rest_carries_it_out(
    world: World, workshop: Workshop
) -> None:
    bob = world.api("bob")
    turn = bob.stream(
        {
            "message": proposal("grace-hopper", "Grace Hopper"),
            "projectId": workshop.project_id,
            "agentDefinitionId": workshop.curator,
        }
    )
    waiting = assert_paused_for_approval(turn)
    conversation_id = turn.meta["conversationId"]
    pending = world.api("cy").call("GET " + APPROVAL, 200, approval_id=waiting["approvalId"]).json()
    assert (pending["status"], pending["canDecide"], pending["tool"]) == ("pending", False, "create_entity")
    bob.call(
        "POST /api/chat/stream",
        409,
        "approval_pending",
        json={"message": "Hurry up", "conversationId": conversation_id},
    )
    bob.call(ENTITY, 404, "entity_not_found", project_id=workshop.project_id, id_or_key="grace-hopper")
    world.api("cy").call(
        DECISION, 403, "forbidden", json={"decision": "approve"}, approval_id=waiting["approvalId"]
    )
    bob.call(
        DECISION, 400, "invalid_request", json={"decision": "perhaps"}, approval_id=waiting["approvalId"]
    )
    bob.call(
        DECISION,
        400,
        "invalid_reason",
        json={"decision": "approve", "reason": "x" * 2001},
        approval_id=waiting["approvalId"],
    )

    async with socket(bob) as watcher:
        await watcher.send({"type": "chat.subscribe", "conversationId": conversation_id})
        decided = bob.call(
            DECISION,
            200,
            json={"decision": "approve", "reason": "looks right"},
            approval_id=waiting["approvalId"],
        ).json()
        event = await watcher.next_event()
        continued = await watcher.turn()

    assert (decided["conversationId"], decided["continued"], decided["approval"]["status"]) == (
        conversation_id,
        True,
        "approved",
    )
    assert (event["type"], event["status"], event["decidedBy"], event["callId"], event["continued"]) == (
        "approval_decided",
        "approved",
        "bob",
        waiting["callId"],
        True,
    )
    assert (
        continued.meta["conversationId"] == conversation_id and continued.meta["runId"] != turn.meta["runId"]
    )
    assert [(f["callId"], f["status"]) for f in continued.of_type("mcp_tool")] == [
        (waiting["callId"], "completed")
    ]
    assert continued.error is None and continued.done["messageId"] is not None
    created = bob.call(ENTITY, 200, project_id=workshop.project_id, id_or_key="grace-hopper").json()
    assert created["name"] == "Grace Hopper"
    history = bob.call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}/history",
        200,
        project_id=workshop.project_id,
        id_or_key="grace-hopper",
    ).json()
    assert [(c["action"], c["authority"], c["approvalId"], c["user"]) for c in history["items"]] == [
        ("create_entity", "approval", waiting["approvalId"], "bob")
    ]
    bob.call(
        DECISION, 409, "approval_not_pending", json={"decision": "reject"}, approval_id=waiting["approvalId"]
    )
    bob.call("GET " + APPROVAL, 404, "approval_not_found", approval_id=str(uuid.uuid4()))
    bob.call(DECISION, 404, "approval_not_found", json={"decision": "approve"}, approval_id=str(uuid.uuid4()))
    world.api("dan").call("GET " + APPROVAL, 404, "approval_not_found", approval_id=waiting["approvalId"])


@covers("WS chat.approval", "frames", "error approval_not_pending")
async def test_a_write_rejected_over_the_websocket_writes_nothing_and_the_agent_goes_on(
    world: World, workshop: Workshop
) -> None:
    bob = world.api("bob")
    async with socket(bob) as ws:
        await ws.send(
            {
                "type": "chat.message",
                "message": proposal("alan-turing", "Alan Turing"),
                "projectId": workshop.project_id,
                "agentDefinitionId": workshop.curator,
            }
        )
        turn = await ws.turn()
        waiting = assert_paused_for_approval(turn)

        await ws.send(
            {
                "type": "chat.approval",
                "approvalId": waiting["approvalId"],
                "decision": "reject",
                "reason": "not now",
            }
        )
        event = await ws.next_event()
        continued = await ws.turn()
        await ws.send({"type": "chat.approval", "approvalId": waiting["approvalId"], "decision": "approve"})
        too_late = await ws.next_event()

    assert (event["type"], event["status"], event["reason"], event["continued"]) == (
        "approval_decided",
        "rejected",
        "not now",
        True,
    )
    assert event["result"]["code"] == "approval_rejected"
    tools = continued.of_type("mcp_tool")
    assert [(f["callId"], f["status"]) for f in tools] == [(waiting["callId"], "error")]
    assert continued.error is None and continued.text == "The tool said no."
    assert too_late["code"] == "approval_not_pending"
    bob.call(ENTITY, 404, "entity_not_found", project_id=workshop.project_id, id_or_key="alan-turing")
    approval = bob.call("GET " + APPROVAL, 200, approval_id=waiting["approvalId"]).json()
    assert (approval["status"], approval["reason"], approval["decidedBy"]) == ("rejected", "not now", "bob")

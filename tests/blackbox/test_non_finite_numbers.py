"""Issue #47 item 3: a number that is not finite in any JSON a client sends.

Python's JSON parser reads ``NaN``, ``Infinity`` and ``-Infinity``, and a literal beyond the double
range (``1e999``) as infinity; PostgreSQL's ``jsonb`` refuses them all. Every route that takes JSON
(each REST body, graph import lines, a graph tool's arguments, the SSE request, each websocket
message, MCP's ``tools/call``) refuses such a number with its documented error naming where it
was (``field``, ``argument``, ``line``; the message for a frame or an MCP result), and stores
nothing. What a model passes to a tool is the model's: a tool error, and the turn answers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.blackbox.clients import TIMEOUT, socket
from tests.blackbox.covers import covers
from tests.blackbox.server import Kgchat
from tests.blackbox.world import GRAPH, World

NUMBERS = {"nan": "NaN", "infinity": "Infinity", "minus-infinity": "-Infinity", "overflow": "1e999"}
FACTS = {"entities": [{"name": "Grace Hopper", "type": "Person", "description": "A rear admiral."}]}


@dataclass
class Targets:
    """ada's project "Numbers" and one of each thing a JSON body can change in it."""

    project: str
    bob: str
    definition: str
    conversation: str
    message: str
    approval: str
    change_set: str
    token: str


@dataclass
class Refusal:
    code: str
    message: str
    where: str | int | None  # the error body's field, argument or line; None in a frame or MCP result


Send = Callable[[World, Targets, str], Awaitable[Refusal]]


def _wait_for_review(world: World, project: str, document: str) -> str:
    path = {"project_id": project, "document_id": document}
    operation = "GET /api/projects/{project_id}/documents/{document_id}/extraction"
    started = world.api("ada").call(
        "POST /api/projects/{project_id}/documents/{document_id}/extraction", 202, **path
    )
    review, deadline = started.json(), time.monotonic() + 120
    while review["status"] == "running" and time.monotonic() < deadline:
        time.sleep(0.5)
        review = world.api("ada").call(operation, 200, **path).json()
    assert review["status"] == "review", review
    return str(review["id"])


@pytest.fixture(scope="module")
def targets(kgchat: Kgchat, world: World) -> Targets:
    ada = world.api("ada")
    project = str(ada.call("POST /api/projects", 201, json={"name": "Numbers"}).json()["id"])
    ada.call(
        "POST /api/projects/{project_id}/members",
        201,
        json={"username": "bob", "role": "editor"},
        project_id=project,
    )
    ada.call("POST /api/projects/{project_id}/graph/import", 200, content=GRAPH, project_id=project)
    ada.call("POST /api/admin/projects/{project_id}/install-default-agents", 200, project_id=project)
    members = ada.call("GET /api/projects/{project_id}/members", 200, project_id=project).json()["items"]
    agents = ada.call("GET /api/projects/{project_id}/agent-definitions", 200, project_id=project).json()
    by_name = {a["name"]: a["id"] for a in agents["items"]}
    plain = ada.stream({"message": "Tell me about London", "projectId": project})
    proposal = {"key": "grace-hopper", "type": "Person", "name": "Grace Hopper"}
    paused = ada.stream(
        {
            "message": f"#tool create_entity {json.dumps(proposal)}\nPlease add Grace Hopper.",
            "projectId": project,
            "agentDefinitionId": by_name["graph-curator-agent"],
        }
    )
    document = ada.call(
        "POST /api/projects/{project_id}/documents",
        201,
        files={
            "file": ("navy.md", ("Grace served.\n\n#facts " + json.dumps(FACTS)).encode(), "text/markdown")
        },
        project_id=project,
    ).json()["document"]
    return Targets(
        project=project,
        bob=str(next(m["userId"] for m in members if m["username"] == "bob")),
        definition=by_name["graph-query-agent"],
        conversation=plain.meta["conversationId"],
        message=plain.done["messageId"],
        approval=paused.of_type("approval_required")[0]["approvalId"],
        change_set=_wait_for_review(world, project, document["id"]),
        token=kgchat.manage("create_api_token", "ada", "--project", project, "--name", "numbers").strip(),
    )


@pytest.fixture(scope="module")
def stored(world: World, targets: Targets) -> list[Any]:
    """What is stored before any refusal: every case leaves it so."""
    return snapshot(world, targets)


def snapshot(world: World, t: Targets) -> list[Any]:
    """Everything the routes below could change, as ada and dan read it."""
    ada, project = world.api("ada"), {"project_id": t.project}
    reads = [
        ada.call("GET /api/projects", 200),
        world.api("dan").call("GET /api/projects", 200),
        ada.call("GET /api/projects/{project_id}/members", 200, **project),
        ada.call("GET /api/projects/{project_id}/invitations", 200, **project),
        ada.call("GET /api/projects/{project_id}/agent-definitions", 200, **project),
        ada.call("GET /api/projects/{project_id}/graph/entities", 200, params={"limit": 500}, **project),
        ada.call(
            "GET /api/projects/{project_id}/graph/entities/{id_or_key}",
            200,
            id_or_key="ada-lovelace",
            **project,
        ),
        ada.call("GET /api/projects/{project_id}/extraction-settings", 200, **project),
        ada.call("GET /api/chat/conversations", 200, params={"projectId": t.project}),
        ada.call("GET /api/chat/conversations/{conversation_id}", 200, conversation_id=t.conversation),
        ada.call("GET /api/chat/conversations/{conversation_id}/shares", 200, conversation_id=t.conversation),
        ada.call("GET /api/approvals/{approval_id}", 200, approval_id=t.approval),
        ada.call("GET /api/change-sets/{change_set_id}", 200, change_set_id=t.change_set),
    ]
    return [r.json() for r in reads]


def filled(template: str, t: Targets, number: str) -> str:
    """``template`` with ``<n>`` the number and ``<project>``, ``<conversation>``, ``<approval>`` ids."""
    text = template.replace("<n>", number)
    for name in ("project", "conversation", "approval"):
        text = text.replace(f"<{name}>", getattr(t, name))
    return text


def rest(operation: str, code: str, template: str, user: str = "ada", **path: str) -> Send:
    """A REST request whose body is ``template`` filled in, refused with ``code``; a ``path``
    parameter is a ``Targets`` attribute's value, or itself."""

    async def send(world: World, t: Targets, number: str) -> Refusal:
        params = {name: getattr(t, value, value) for name, value in path.items()}
        answer = (
            world.api(user)
            .call(
                operation,
                400,
                code,
                content=filled(template, t, number),
                headers={"Content-Type": "application/json"},
                **params,
            )
            .json()
        )
        where = answer.get("field", answer.get("argument", answer.get("line")))
        return Refusal(answer["code"], answer["error"], where)

    return send


def websocket(template: str) -> Send:
    """A websocket message (``template`` filled in), answered by an ``error`` event."""

    async def send(world: World, t: Targets, number: str) -> Refusal:
        async with socket(world.api("ada")) as ws:
            await ws.send(filled(template, t, number))
            event = await ws.next_event()
        assert event["type"] == "error" and "seq" not in event, event
        return Refusal(event["code"], event["error"], None)

    return send


async def mcp_call(world: World, t: Targets, number: str) -> Refusal:
    """``tools/call`` as JSON-RPC text (the SDK's own client would have written ``null``)."""
    request = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "query_entities", '
        '"arguments": {"properties": {"born": ' + number + "}}}}"
    )
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        answer = await http.post(
            f"{world.url}/mcp",
            content=request,
            headers={
                "Authorization": f"Bearer {t.token}",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": "2025-06-18",
            },
        )
    assert answer.status_code == 200, answer.text[:500]
    result = answer.json()["result"]
    assert result["isError"] is True, result
    return Refusal(result["structuredContent"]["code"], result["content"][0]["text"], None)


IMPORT = "POST /api/projects/{project_id}/graph/import"
NEW_ENTITY = '{"kind": "entity", "key": "numbers-a", "type": "Person", "name": "A"}\n'
# name: (how it is sent, the code, where the number is named: a field, an argument, a line)
CASES: dict[str, tuple[Send, str, str | int]] = {
    "create-project": (
        rest("POST /api/projects", "invalid_request", '{"name": "Numbers two", "quota": <n>}'),
        "invalid_request",
        "quota",
    ),
    "add-member": (
        rest(
            "POST /api/projects/{project_id}/members",
            "invalid_request",
            '{"username": "dan", "role": "viewer", "weight": <n>}',
            project_id="project",
        ),
        "invalid_request",
        "weight",
    ),
    "change-role": (
        rest(
            "PATCH /api/projects/{project_id}/members/{user_id}",
            "invalid_request",
            '{"role": "viewer", "weight": <n>}',
            project_id="project",
            user_id="bob",
        ),
        "invalid_request",
        "weight",
    ),
    "invite": (
        rest(
            "POST /api/projects/{project_id}/invitations",
            "invalid_request",
            '{"role": "viewer", "expiresInHours": <n>}',
            project_id="project",
        ),
        "invalid_request",
        "expiresInHours",
    ),
    "accept-invitation": (
        rest("POST /api/invitations/accept", "invalid_request", '{"token": <n>}', user="dan"),
        "invalid_request",
        "token",
    ),
    "create-agent": (
        rest(
            "POST /api/projects/{project_id}/agent-definitions",
            "invalid_request",
            '{"name": "numbers", "model": {"name": "openai/test", "temperature": <n>}}',
            project_id="project",
        ),
        "invalid_request",
        "model.temperature",
    ),
    "change-agent": (
        rest(
            "PATCH /api/agent-definitions/{definition_id}",
            "invalid_request",
            '{"maxSteps": <n>}',
            definition_id="definition",
        ),
        "invalid_request",
        "maxSteps",
    ),
    "rename-conversation": (
        rest(
            "PATCH /api/chat/conversations/{conversation_id}",
            "invalid_request",
            '{"title": "Renamed", "pinned": <n>}',
            conversation_id="conversation",
        ),
        "invalid_request",
        "pinned",
    ),
    "share": (
        rest(
            "POST /api/chat/conversations/{conversation_id}/shares",
            "invalid_request",
            '{"expiresInHours": <n>}',
            conversation_id="conversation",
        ),
        "invalid_request",
        "expiresInHours",
    ),
    "feedback": (
        rest(
            "PUT /api/chat/messages/{message_id}/feedback",
            "invalid_request",
            '{"rating": "up", "weight": <n>}',
            message_id="message",
        ),
        "invalid_request",
        "weight",
    ),
    "approval-decision": (
        rest(
            "POST /api/approvals/{approval_id}/decision",
            "invalid_request",
            '{"decision": "approve", "weight": <n>}',
            approval_id="approval",
        ),
        "invalid_request",
        "weight",
    ),
    "change-set-decision": (
        rest(
            "POST /api/change-sets/{change_set_id}/decision",
            "invalid_request",
            '{"approve": "all", "weight": <n>}',
            change_set_id="change_set",
        ),
        "invalid_request",
        "weight",
    ),
    "extraction-settings": (
        rest(
            "PUT /api/projects/{project_id}/extraction-settings",
            "invalid_request",
            '{"allowNewTypes": true, "weight": <n>}',
            project_id="project",
        ),
        "invalid_request",
        "weight",
    ),
    "sse-stream": (
        rest(
            "POST /api/chat/stream",
            "invalid_request",
            '{"message": "Hello", "projectId": "<project>", "temperature": <n>}',
        ),
        "invalid_request",
        "temperature",
    ),
    "import-entity": (
        rest(
            IMPORT,
            "invalid_import",
            NEW_ENTITY
            + '{"kind": "entity", "key": "numbers-b", "type": "Person", "name": "B", "properties": {"born": <n>}}',
            project_id="project",
        ),
        "invalid_import",
        2,
    ),
    "import-relationship": (
        rest(
            IMPORT,
            "invalid_import",
            NEW_ENTITY
            + '{"kind": "relationship", "type": "KNEW", "src": "numbers-a", "dst": "ada-lovelace", '
            '"properties": {"since": <n>}}',
            project_id="project",
        ),
        "invalid_import",
        2,
    ),
    "graph-tool": (
        rest(
            "POST /api/projects/{project_id}/graph/tools/{tool_name}",
            "invalid_arguments",
            '{"properties": {"born": <n>}}',
            project_id="project",
            tool_name="query_entities",
        ),
        "invalid_arguments",
        "properties.born",
    ),
    "ws-message": (
        websocket('{"type": "chat.message", "message": "Hi", "projectId": "<project>", "temperature": <n>}'),
        "invalid_request",
        "temperature",
    ),
    "ws-subscribe": (
        websocket('{"type": "chat.subscribe", "conversationId": "<conversation>", "afterSeq": <n>}'),
        "invalid_request",
        "afterSeq",
    ),
    "ws-approval": (
        websocket(
            '{"type": "chat.approval", "approvalId": "<approval>", "decision": "approve", "weight": <n>}'
        ),
        "invalid_request",
        "weight",
    ),
    "mcp-tools-call": (mcp_call, "invalid_arguments", "properties.born"),
}


@covers("POST /api/projects", "400 invalid_request")
@covers("POST /api/projects/{project_id}/members", "400 invalid_request")
@covers("PATCH /api/projects/{project_id}/members/{user_id}", "400 invalid_request")
@covers("POST /api/projects/{project_id}/invitations", "400 invalid_request")
@covers("POST /api/invitations/accept", "400 invalid_request")
@covers("POST /api/projects/{project_id}/agent-definitions", "400 invalid_request")
@covers("PATCH /api/agent-definitions/{definition_id}", "400 invalid_request")
@covers("PATCH /api/chat/conversations/{conversation_id}", "400 invalid_request")
@covers("POST /api/chat/conversations/{conversation_id}/shares", "400 invalid_request")
@covers("PUT /api/chat/messages/{message_id}/feedback", "400 invalid_request")
@covers("POST /api/approvals/{approval_id}/decision", "400 invalid_request")
@covers("POST /api/change-sets/{change_set_id}/decision", "400 invalid_request")
@covers("PUT /api/projects/{project_id}/extraction-settings", "400 invalid_request")
@covers("POST /api/chat/stream", "400 invalid_request")
@covers("POST /api/projects/{project_id}/graph/import", "400 invalid_import")
@covers("POST /api/projects/{project_id}/graph/tools/{tool_name}", "400 invalid_arguments")
@covers("WS chat.message", "error invalid_request")
@covers("WS chat.subscribe", "error invalid_request")
@covers("WS chat.approval", "error invalid_request")
@covers("MCP tools/call", "isError")
@pytest.mark.parametrize("number", list(NUMBERS.values()), ids=list(NUMBERS))
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
async def test_a_number_that_is_not_finite_in_any_json_a_client_sends_is_refused_naming_where_and_nothing_is_stored(
    world: World, targets: Targets, stored: list[Any], case: str, number: str
) -> None:
    send, code, where = CASES[case]

    refusal = await send(world, targets, number)

    assert refusal.code == code
    assert "not a finite number" in refusal.message
    if refusal.where is None:
        assert str(where) in refusal.message
    else:
        assert refusal.where == where
    assert snapshot(world, targets) == stored

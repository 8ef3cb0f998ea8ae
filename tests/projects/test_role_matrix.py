"""Each role against each write (issue 14, item 1), over REST, the websocket and MCP.

The rule: viewers read and chat but cannot import, edit agent definitions or change members;
editors import and edit agent definitions; owners also install the default agents and manage
members and invitations. Someone outside the project gets 404 for everything in it (existence
is not revealed) and is refused by the websocket and MCP.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from apps.agents.llm.scripted import ScriptedProvider, register_script, text, unregister_script
from apps.agents.models import AgentDefinition
from apps.chat.models import Conversation
from apps.chat.streams.bus import InProcessFrameBus, set_bus
from apps.chat.turns.service import turn_wait_all
from apps.graph_tools.models import GraphObject
from apps.graph_tools.registry import tool_get
from apps.projects.models import ProjectInvitation, ProjectMembership
from apps.projects.selectors import Principal
from apps.projects.services import invitation_create
from config.asgi import application
from tests.factories import (
    add_member,
    make_agent_definition,
    make_entity,
    make_project,
    make_token,
    make_user,
)
from tests.graph_tools import test_mcp_server as mcp_support

JSON = "application/json"
ROLES = ("owner", "editor", "viewer", "stranger")
MEMBER_ROLES = ("owner", "editor", "viewer")
ANSWER = "The graph says hello."

# The MCP server runs in daphne on a loopback port, as in the MCP tests (one per module).
daphne_url = mcp_support.daphne_url


def build_world() -> dict[str, Any]:
    """A project with one user per role, a member to act on, an agent definition, an entity,
    a pending invitation and a conversation of each user."""
    users = {role: make_user(f"{role}-{uuid.uuid4().hex[:6]}") for role in (*ROLES, "target")}
    project = make_project(owner=users["owner"], name="Matrix")
    add_member(project, users["editor"], "editor")
    add_member(project, users["viewer"], "viewer")
    add_member(project, users["target"], "viewer")
    make_user(f"newcomer-{project.id.hex[:6]}")
    make_entity(project, "paris", type="City", name="Paris", description="Capital city of France")
    invitation, _ = invitation_create(
        principal=Principal(user=users["owner"]), project_ref=project.id, role="viewer"
    )
    conversations = {
        role: Conversation.objects.create(project=project, user=users[role], title=f"{role}'s")
        for role in MEMBER_ROLES
    }
    # The stranger's conversation targets are someone else's: they cannot have one in this project.
    conversations["stranger"] = conversations["owner"]
    return {
        "users": users,
        "project": project,
        "definition": make_agent_definition(project, name="existing"),
        "invitation": invitation,
        "conversations": conversations,
    }


def snapshot(world: dict[str, Any]) -> dict[str, Any]:
    """Everything a write in the matrix could change, to prove a refused write changed nothing."""
    project = world["project"]
    return {
        "definitions": sorted(
            AgentDefinition.objects.filter(project=project).values_list("name", "description")
        ),
        "entities": sorted(GraphObject.objects.filter(project=project).values_list("key", flat=True)),
        "members": sorted(
            ProjectMembership.objects.filter(project=project).values_list("user__username", "role")
        ),
        "invitations": sorted(
            ProjectInvitation.objects.filter(project=project).values_list("id", "revoked_at")
        ),
        "conversations": sorted(Conversation.objects.filter(project=project).values_list("id", "title")),
    }


def rest(world: dict[str, Any], role: str) -> Client:
    client = Client()
    client.force_login(world["users"][role])
    return client


Write = Callable[[Client, dict[str, Any], str], Any]

IMPORT_LINE = '{"kind": "entity", "key": "lisbon", "type": "City", "name": "Lisbon"}'


def _p(w: dict[str, Any]) -> str:
    return f"/api/projects/{w['project'].id}"


REST_WRITES: dict[str, tuple[Write, dict[str, int]]] = {
    "create agent definition": (
        lambda c, w, r: c.post(f"{_p(w)}/agent-definitions", {"name": "new-agent"}, content_type=JSON),
        {"owner": 201, "editor": 201, "viewer": 403, "stranger": 404},
    ),
    "patch agent definition": (
        lambda c, w, r: c.patch(
            f"/api/agent-definitions/{w['definition'].id}", {"description": "changed"}, content_type=JSON
        ),
        {"owner": 200, "editor": 200, "viewer": 403, "stranger": 404},
    ),
    "delete agent definition": (
        lambda c, w, r: c.delete(f"/api/agent-definitions/{w['definition'].id}"),
        {"owner": 204, "editor": 204, "viewer": 403, "stranger": 404},
    ),
    "import graph": (
        lambda c, w, r: c.post(f"{_p(w)}/graph/import", IMPORT_LINE, content_type="application/x-ndjson"),
        {"owner": 200, "editor": 200, "viewer": 403, "stranger": 404},
    ),
    "install default agents": (
        lambda c, w, r: c.post(f"/api/admin/projects/{w['project'].id}/install-default-agents"),
        {"owner": 200, "editor": 403, "viewer": 403, "stranger": 404},
    ),
    "add member": (
        lambda c, w, r: c.post(
            f"{_p(w)}/members", {"username": f"newcomer-{w['project'].id.hex[:6]}"}, content_type=JSON
        ),
        {"owner": 201, "editor": 403, "viewer": 403, "stranger": 404},
    ),
    "change member role": (
        lambda c, w, r: c.patch(
            f"{_p(w)}/members/{w['users']['target'].pk}", {"role": "editor"}, content_type=JSON
        ),
        {"owner": 200, "editor": 403, "viewer": 403, "stranger": 404},
    ),
    "remove member": (
        lambda c, w, r: c.delete(f"{_p(w)}/members/{w['users']['target'].pk}"),
        {"owner": 204, "editor": 403, "viewer": 403, "stranger": 404},
    ),
    "create invitation": (
        lambda c, w, r: c.post(f"{_p(w)}/invitations", {"role": "viewer"}, content_type=JSON),
        {"owner": 201, "editor": 403, "viewer": 403, "stranger": 404},
    ),
    "list invitations": (
        lambda c, w, r: c.get(f"{_p(w)}/invitations"),
        {"owner": 200, "editor": 403, "viewer": 403, "stranger": 404},
    ),
    "revoke invitation": (
        lambda c, w, r: c.delete(f"{_p(w)}/invitations/{w['invitation'].id}"),
        {"owner": 204, "editor": 403, "viewer": 403, "stranger": 404},
    ),
    "rename own conversation": (
        lambda c, w, r: c.patch(
            f"/api/chat/conversations/{w['conversations'][r].id}", {"title": "renamed"}, content_type=JSON
        ),
        {"owner": 200, "editor": 200, "viewer": 200, "stranger": 404},
    ),
    "delete own conversation": (
        lambda c, w, r: c.delete(f"/api/chat/conversations/{w['conversations'][r].id}"),
        {"owner": 204, "editor": 204, "viewer": 204, "stranger": 404},
    ),
}

READS: dict[str, Callable[[Client, dict[str, Any]], Any]] = {
    "project": lambda c, w: c.get(_p(w)),
    "members": lambda c, w: c.get(f"{_p(w)}/members"),
    "entities": lambda c, w: c.get(f"{_p(w)}/graph/entities"),
    "agent definitions": lambda c, w: c.get(f"{_p(w)}/agent-definitions"),
    "graph tool": lambda c, w: c.post(f"{_p(w)}/graph/tools/list_entity_types", {}, content_type=JSON),
}


@pytest.mark.django_db
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("write", list(REST_WRITES))
def test_rest_write_answers_what_the_role_allows_and_a_refusal_changes_nothing(write, role):
    world = build_world()
    call, expected = REST_WRITES[write]
    before = snapshot(world)

    response = call(rest(world, role), world, role)

    assert response.status_code == expected[role], response.content
    if response.status_code == 403:
        needed = "owner" if expected["editor"] == 403 else "editor"
        assert (response.json()["code"], response.json()["requiredRole"]) == ("forbidden", needed)
    if response.status_code == 404:
        assert response.json()["code"] == not_found_code(response.request["PATH_INFO"])
    if response.status_code >= 400:
        assert snapshot(world) == before
    else:
        assert snapshot(world) != before or write == "list invitations"


def not_found_code(path: str) -> str:
    """What a stranger's 404 says: the first object on the path they cannot see."""
    if path.startswith("/api/agent-definitions/"):
        return "agent_definition_not_found"
    if path.startswith("/api/chat/conversations/"):
        return "conversation_not_found"
    return "project_not_found"


@pytest.mark.django_db
@pytest.mark.parametrize("role", ROLES)
def test_every_member_reads_and_a_stranger_gets_404(role):
    world = build_world()
    client = rest(world, role)

    statuses = {name: read(client, world).status_code for name, read in READS.items()}

    expected = 404 if role == "stranger" else 200
    assert statuses == dict.fromkeys(READS, expected)


# --- websocket ----------------------------------------------------------------------------------


@pytest.fixture
def scripted_model(settings):
    name = f"matrix-{uuid.uuid4().hex[:8]}"
    register_script(name, ScriptedProvider(responder=lambda messages, tools: text(ANSWER)))
    settings.KGCHAT_MODEL = f"scripted/{name}"
    set_bus(InProcessFrameBus())
    yield
    set_bus(None)
    unregister_script(name)


def _session_cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def ws_connect(user: Any) -> WebsocketCommunicator:
    session = await sync_to_async(_session_cookie)(user)
    communicator = WebsocketCommunicator(
        application,
        "/ws/chat/",
        headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", f"sessionid={session}".encode())],
    )
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def ws_request(communicator: WebsocketCommunicator, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Send one request; return the frames up to ``done``, or the request-level error frame."""
    await communicator.send_json_to(payload)
    frames = []
    while True:
        frame = await communicator.receive_json_from(timeout=30)
        frames.append(frame)
        if frame["type"] == "done" or (frame["type"] == "error" and "seq" not in frame):
            return frames


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("role", MEMBER_ROLES)
async def test_every_member_role_chats_over_the_websocket(role, scripted_model):
    world = await sync_to_async(build_world)()
    communicator = await ws_connect(world["users"][role])

    frames = await ws_request(
        communicator, {"type": "chat.message", "message": "hello?", "projectId": str(world["project"].id)}
    )
    await communicator.disconnect()
    await turn_wait_all()

    assert frames[0]["type"] == "meta"
    assert frames[-1]["type"] == "done" and frames[-1]["messageId"] is not None
    assert "".join(f["token"] for f in frames if f["type"] == "token") == ANSWER


@pytest.mark.django_db(transaction=True)
async def test_a_stranger_can_neither_chat_in_the_project_nor_open_its_conversation(scripted_model):
    world = await sync_to_async(build_world)()
    owners_conversation = str(world["conversations"]["owner"].id)
    communicator = await ws_connect(world["users"]["stranger"])

    new = await ws_request(
        communicator, {"type": "chat.message", "message": "hi", "projectId": str(world["project"].id)}
    )
    continued = await ws_request(
        communicator, {"type": "chat.message", "message": "hi", "conversationId": owners_conversation}
    )
    subscribed = await ws_request(
        communicator, {"type": "chat.subscribe", "conversationId": owners_conversation}
    )
    await communicator.disconnect()

    assert [(f["type"], f["code"]) for f in new] == [("error", "project_not_found")]
    assert [(f["type"], f["code"]) for f in continued] == [("error", "conversation_not_found")]
    assert [(f["type"], f["code"]) for f in subscribed] == [("error", "conversation_not_found")]
    assert await Conversation.objects.filter(user=world["users"]["stranger"]).acount() == 0


# --- MCP ----------------------------------------------------------------------------------------


def mcp_tokens(world: dict[str, Any]) -> dict[str, str]:
    """A token bound to the project per member; the stranger's is bound to a project of their own."""
    tokens = {role: make_token(world["users"][role], world["project"]) for role in MEMBER_ROLES}
    stranger = world["users"]["stranger"]
    tokens["stranger"] = make_token(stranger, make_project(owner=stranger, name="Stranger's"))
    return tokens


@pytest.mark.django_db(transaction=True)
async def test_mcp_members_read_with_read_only_tools_and_a_stranger_or_unknown_token_is_refused(daphne_url):
    world = await sync_to_async(build_world)()
    tokens = await sync_to_async(mcp_tokens)(world)
    project_header = {"X-Project-ID": str(world["project"].id)}

    read: dict[str, Any] = {}
    for role in MEMBER_ROLES:
        async with mcp_support.http_client(daphne_url, {"Authorization": f"Bearer {tokens[role]}"}) as client:
            listed = await client.list_tools()
            read[role] = mcp_support.payload(await client.call_tool("list_entity_types", {}))
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    async with httpx.AsyncClient(timeout=30) as raw:
        stranger = await raw.post(
            daphne_url, json=init, headers={"Authorization": f"Bearer {tokens['stranger']}", **project_header}
        )
        unknown = await raw.post(
            daphne_url, json=init, headers={"Authorization": "Bearer kgc_unknown", **project_header}
        )

    assert {role: result["types"] for role, result in read.items()} == {
        role: [{"type": "City", "count": 1}] for role in MEMBER_ROLES
    }
    # Read tools are read-only; the write tools (issue 15) say they are not.
    assert all(
        t.annotations is not None and t.annotations.read_only_hint is tool_get(t.name).read_only
        for t in listed.tools
    )
    assert (stranger.status_code, stranger.json()["code"]) == (404, "project_not_found")
    assert (unknown.status_code, unknown.json()["code"]) == (401, "unauthorized")


def remove_then_read(world: dict[str, Any], user: Any) -> tuple[int, int]:
    """The owner removes ``user``; then ``user`` reads the project: the two statuses."""
    removed = rest(world, "owner").delete(f"{_p(world)}/members/{user.pk}")
    client = Client()
    client.force_login(user)
    return removed.status_code, client.get(_p(world)).status_code


@pytest.mark.django_db(transaction=True)
async def test_a_removed_member_loses_rest_websocket_and_mcp_at_once(daphne_url, scripted_model):
    world = await sync_to_async(build_world)()
    viewer = world["users"]["viewer"]
    token = await sync_to_async(make_token)(viewer, world["project"])
    conversation = str(world["conversations"]["viewer"].id)

    removed, reading = await sync_to_async(remove_then_read)(world, viewer)
    communicator = await ws_connect(viewer)
    chat = await ws_request(
        communicator, {"type": "chat.message", "message": "hi", "conversationId": conversation}
    )
    await communicator.disconnect()
    async with httpx.AsyncClient(timeout=30) as raw:
        mcp = await raw.post(
            daphne_url,
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
            headers={"Authorization": f"Bearer {token}"},
        )

    assert removed == 204
    assert reading == 404
    assert [(f["type"], f["code"]) for f in chat] == [("error", "conversation_not_found")]
    assert mcp.status_code == 401
    assert json.loads(mcp.content)["code"] == "unauthorized"


@pytest.mark.django_db(transaction=True)
async def test_a_bound_mcp_token_stops_working_when_its_membership_is_deleted_outside_the_members_api(
    daphne_url,
):
    world = await sync_to_async(build_world)()
    viewer = world["users"]["viewer"]
    token = await sync_to_async(make_token)(viewer, world["project"])
    await ProjectMembership.objects.filter(user=viewer, project=world["project"]).adelete()

    async with httpx.AsyncClient(timeout=30) as raw:
        mcp = await raw.post(
            daphne_url,
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
            headers={"Authorization": f"Bearer {token}"},
        )

    assert (mcp.status_code, json.loads(mcp.content)["code"]) == (404, "project_not_found")

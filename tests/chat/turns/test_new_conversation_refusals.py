"""A new conversation under the rate limit users run with (``KGCHAT_TURNS_PER_MINUTE``, default 30):
plain and agent conversations are answered over both transports, and each documented refusal of
the new-conversation path is the documented code, never ``internal_error`` (issue #23, item 1).

The plain path and every refusal leave the one-query admission (project and definition read
together with the sender's rate) and count the rate alone; that count once carried Django's
``ORDER BY id`` into a ``COUNT`` and PostgreSQL refused it, so every new plain conversation
answered 500 while the suite, run with the limit off, passed.
"""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings as django_settings

from apps.agents.llm.scripted import text
from apps.chat.models import Conversation, Message
from apps.projects.selectors import Principal
from apps.projects.services import member_remove
from tests.chat.conftest import adb, agent_request, sse_turn, tokens, types, ws_connect, ws_turn
from tests.factories import add_member, make_project, make_user

pytestmark = pytest.mark.django_db(transaction=True)

USER_DEFAULT = 30  # config/settings/base.py's KGCHAT_TURNS_PER_MINUTE


@pytest.fixture(autouse=True)
def _the_users_rate_limit(settings):
    settings.KGCHAT_TURNS_PER_MINUTE = USER_DEFAULT


def test_the_default_rate_limit_is_what_these_tests_run_with():
    from config.settings import base

    assert base.KGCHAT_TURNS_PER_MINUTE == USER_DEFAULT == django_settings.KGCHAT_TURNS_PER_MINUTE


def plain_request(world, message="Where is Paris?"):
    return {"message": message, "projectId": str(world["project"].id)}


async def test_a_new_plain_conversation_is_answered_over_sse(world, scripted):
    scripted.turns.append(text("Paris is in France."))

    status, frames = await sse_turn(world["client"], plain_request(world))

    assert status == 200, frames
    assert types(frames)[0] == "meta" and types(frames)[-1] == "done"
    assert frames[0]["agentDefinitionId"] is None and frames[0]["runId"] is None
    assert tokens(frames) == "Paris is in France."
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert answer.content == "Paris is in France."


async def test_a_new_plain_conversation_is_answered_over_the_websocket(world, scripted):
    scripted.turns.append(text("Paris is in France."))
    socket = await ws_connect(world["user"])
    try:
        frames = await ws_turn(socket, {"type": "chat.message", **plain_request(world)})
    finally:
        await socket.disconnect()

    assert types(frames)[0] == "meta" and types(frames)[-1] == "done", frames
    assert tokens(frames) == "Paris is in France."


async def test_a_new_agent_conversation_is_answered_over_both_transports(world, agent, scripted):
    scripted.turns += [text("By SSE."), text("By socket.")]

    status, frames = await sse_turn(world["client"], agent_request(world, agent))
    socket = await ws_connect(world["user"])
    try:
        ws_frames = await ws_turn(socket, {"type": "chat.message", **agent_request(world, agent)})
    finally:
        await socket.disconnect()

    assert status == 200 and tokens(frames) == "By SSE."
    assert tokens(ws_frames) == "By socket."


async def test_a_plain_follow_up_is_answered(world, scripted):
    scripted.turns += [text("First."), text("Second.")]
    _, first = await sse_turn(world["client"], plain_request(world))

    status, frames = await sse_turn(
        world["client"], {"message": "And then?", "conversationId": first[0]["conversationId"]}
    )

    assert status == 200 and tokens(frames) == "Second."


async def test_the_rate_limit_refuses_a_new_plain_conversation_with_429(world, scripted, settings):
    settings.KGCHAT_TURNS_PER_MINUTE = 1
    scripted.turns.append(text("Once."))
    await sse_turn(world["client"], plain_request(world))

    status, body = await sse_turn(world["client"], plain_request(world))

    assert (status, body["code"]) == (429, "rate_limited")
    assert await Conversation.objects.acount() == 1


REFUSALS = [
    ("a project the sender cannot see", "other", None, 404, "project_not_found"),
    ("a project the sender cannot see, with its agent", "other", "other", 404, "project_not_found"),
    ("an unknown project", "unknown", None, 404, "project_not_found"),
    ("an unknown agent definition", "own", "unknown", 400, "agent_definition_not_found"),
    ("another project's agent definition", "own", "other", 400, "agent_definition_not_found"),
]


async def _refusal_body(world, project_ref, definition_ref):
    other_owner = await adb(make_user)("olga")
    other = await adb(make_project)(owner=other_owner, name="Elsewhere")
    from apps.agents.definitions import default_agents_install

    await adb(default_agents_install)(project=other)
    other_agent = await other.agent_definitions.afirst()
    projects = {"own": world["project"].id, "other": other.id, "unknown": uuid.uuid4()}
    definitions = {"unknown": uuid.uuid4(), "other": other_agent.id}
    body = {"message": "hello", "projectId": str(projects[project_ref])}
    if definition_ref:
        body["agentDefinitionId"] = str(definitions[definition_ref])
    return body


@pytest.mark.parametrize(("case", "project_ref", "definition_ref", "status", "code"), REFUSALS)
async def test_each_refusal_of_a_new_conversation_over_sse_is_documented(
    world, scripted, case, project_ref, definition_ref, status, code
):
    body = await _refusal_body(world, project_ref, definition_ref)

    answer_status, answer = await sse_turn(world["client"], body)

    assert (answer_status, answer["code"]) == (status, code), case
    assert not await Conversation.objects.filter(project=world["project"]).aexists()


@pytest.mark.parametrize(("case", "project_ref", "definition_ref", "status", "code"), REFUSALS)
async def test_each_refusal_of_a_new_conversation_over_the_websocket_is_documented(
    world, scripted, case, project_ref, definition_ref, status, code
):
    body = await _refusal_body(world, project_ref, definition_ref)
    socket = await ws_connect(world["user"])
    try:
        frames = await ws_turn(socket, {"type": "chat.message", **body})
        # The socket stays open: a good message after the refusal is answered.
        scripted.turns.append(text("Still here."))
        after = await ws_turn(socket, {"type": "chat.message", **plain_request(world)})
    finally:
        await socket.disconnect()

    assert [(f["type"], f["code"]) for f in frames] == [("error", code)], case
    assert tokens(after) == "Still here."


async def test_a_removed_member_s_open_socket_is_told_project_not_found(world, scripted):
    member = await adb(make_user)("mallory")
    await adb(add_member)(world["project"], member, "editor")
    socket = await ws_connect(member)
    try:
        scripted.turns.append(text("Welcome."))
        first = await ws_turn(socket, {"type": "chat.message", **plain_request(world)})
        await adb(member_remove)(
            principal=Principal(user=world["user"]),
            project_ref=world["project"].id,
            user_id=member.id,
        )

        frames = await ws_turn(socket, {"type": "chat.message", **plain_request(world)})
    finally:
        await socket.disconnect()

    assert tokens(first) == "Welcome."
    assert [(f["type"], f["code"]) for f in frames] == [("error", "project_not_found")]

"""Plain (not agent-backed) conversations: the always-retrieve flow over SSE."""

import pytest
from django.test import AsyncClient

from apps.agents.llm.scripted import Delay, error, text
from apps.chat.models import Conversation, Message
from tests.chat.conftest import adb, sse_turn, tokens, types
from tests.factories import make_project, make_user

pytestmark = pytest.mark.django_db(transaction=True)


async def test_create_plain_conversation_backward_compatible(world, scripted):
    scripted.turns.append(text("Paris is ", "the capital."))

    status, frames = await sse_turn(
        world["client"], {"message": "What is Paris?", "projectId": str(world["project"].id)}
    )

    assert status == 200
    assert types(frames) == ["meta", "token", "token", "done"]
    meta, done = frames[0], frames[-1]
    conversation = await Conversation.objects.aget(id=meta["conversationId"])
    assert conversation.agent_definition_id is None
    assert meta["agentDefinitionId"] is None and meta["runId"] is None
    assert meta["model"] == scripted.name
    messages = [m async for m in Message.objects.filter(conversation=conversation).order_by("created_at")]
    assert [(m.role, m.content) for m in messages] == [
        ("user", "What is Paris?"),
        ("assistant", "Paris is the capital."),
    ]
    assert done["messageId"] == str(messages[1].id)
    assert meta["messageId"] == str(messages[0].id)


async def test_direct_llm_flow_unchanged_always_retrieves_without_tools(world, scripted):
    scripted.turns.append(text("ok"))

    await sse_turn(world["client"], {"message": "Paris", "projectId": str(world["project"].id)})

    call = scripted.calls[0]
    assert call.tools == []
    system = call.messages[0]
    assert system.role == "system"
    assert str(world["paris"].id) in system.content and "Capital city of France" in system.content
    assert [m.role for m in call.messages] == ["system", "user"]


async def test_plain_answer_keeps_retrieved_entities_in_retrieval_context(world, scripted):
    scripted.turns.append(
        text("See ", f"[Paris](entity:{world['paris'].id})", " and [Atlantis](entity:nope).")
    )

    _status, frames = await sse_turn(
        world["client"], {"message": "Paris", "projectId": str(world["project"].id)}
    )

    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert answer.content == f"See [Paris](entity:{world['paris'].id}) and Atlantis."
    assert tokens(frames) == answer.content
    assert str(world["paris"].id) in answer.retrieval_context["entity_ids"]
    assert frames[-1]["citations"] == [
        {"id": str(world["paris"].id), "key": "paris", "type": "City", "name": "Paris"}
    ]


async def test_second_turn_sees_history_oldest_first(world, scripted):
    scripted.turns += [text("first answer"), text("second answer")]
    _, frames = await sse_turn(world["client"], {"message": "one", "projectId": str(world["project"].id)})

    await sse_turn(world["client"], {"message": "two", "conversationId": frames[0]["conversationId"]})

    roles = [(m.role, m.content) for m in scripted.calls[1].messages[1:]]
    assert roles == [("user", "one"), ("assistant", "first answer"), ("user", "two")]


async def test_llm_failure_keeps_user_message_and_writes_no_answer(world, scripted):
    scripted.turns.append(error("upstream exploded", status=500))

    _, frames = await sse_turn(world["client"], {"message": "hi", "projectId": str(world["project"].id)})

    assert types(frames) == ["meta", "error", "done"]
    assert frames[1]["code"] == "llm_error"
    assert frames[2]["messageId"] is None
    roles = [m.role async for m in Message.objects.filter(conversation_id=frames[0]["conversationId"])]
    assert roles == ["user"]


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
    conversation_id = __import__("json").loads(meta.decode().split("data: ", 1)[1])["conversationId"]

    status, body = await sse_turn(client, {"message": "two", "conversationId": conversation_id})
    rest = [chunk async for chunk in stream]
    await __import__("apps.chat.services", fromlist=["x"]).turn_wait_all()
    status_after, frames_after = await sse_turn(client, {"message": "two", "conversationId": conversation_id})

    assert status == 409 and body["code"] == "turn_in_progress"
    assert rest
    assert status_after == 200 and tokens(frames_after) == "next"
    contents = [
        m.content
        async for m in Message.objects.filter(conversation_id=conversation_id).order_by("created_at")
    ]
    assert contents == ["one", "slow", "two", "next"]

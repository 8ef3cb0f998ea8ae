"""The plain branch of a turn (apps/chat/plain_turn.py): always retrieve, one streamed answer, over SSE."""

import pytest

from apps.agents.llm.base import Usage
from apps.agents.llm.scripted import Delay, error, text
from apps.agents.models import AgentRun
from apps.chat.models import Conversation, Message
from tests.chat.conftest import sse_turn, tokens, types

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


async def test_a_plain_answer_is_stored_with_the_record_of_the_tokens_its_model_reported(world, scripted):
    scripted.turns.append(text("Paris is ", "the capital.", usage=Usage(input_tokens=120, output_tokens=8)))

    _, frames = await sse_turn(
        world["client"], {"message": "What is Paris?", "projectId": str(world["project"].id)}
    )

    meta, done = frames[0], frames[-1]
    answer = await Message.objects.aget(id=done["messageId"])
    question = await Message.objects.aget(id=meta["messageId"])
    run = await AgentRun.objects.aget(id=answer.retrieval_context["usage_run_id"])
    assert (run.input_tokens, run.output_tokens, run.model) == (120, 8, scripted.name)
    assert (run.status, run.stop_reason, run.step_count) == ("success", "completed", 1)
    assert run.agent_definition_id is None and str(run.conversation_id) == meta["conversationId"]
    assert run.started_at == question.created_at and run.completed_at >= run.started_at
    assert meta["runId"] is None and done["runId"] is None  # no agent run to trace


async def test_a_plain_answer_cut_by_the_timeout_is_stored_with_a_record_closed_as_timeout(
    world, scripted, settings
):
    settings.KGCHAT_TURN_TIMEOUT_SECONDS = 1
    scripted.turns.append([*text("Partial "), Delay(10), *text("never")])

    _, frames = await sse_turn(world["client"], {"message": "hi", "projectId": str(world["project"].id)})

    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    run = await AgentRun.objects.aget(id=answer.retrieval_context["usage_run_id"])
    assert answer.content == "Partial " and answer.retrieval_context["stop_reason"] == "timeout"
    assert (run.status, run.stop_reason, run.input_tokens, run.output_tokens) == ("error", "timeout", 0, 0)

"""Issue #11 (red team, bad input): the chat transports refuse what cannot be stored, and keep going.

NUL characters and unpaired surrogates (legal as JSON escapes) cannot be stored by PostgreSQL;
JSON nested 10,000 deep exhausts Python's parser. Each gets a 400 / an ``error`` frame with
code ``invalid_request`` naming the field, nothing is persisted, and the socket stays open.
"""

import json

import pytest

from apps.agents.llm.base import TextDelta
from apps.agents.llm.scripted import Delay, text, tool_call
from apps.agents.models import AgentRunToolCall
from apps.chat.models import Conversation, Message
from tests.chat.conftest import adb, sse_turn, tokens, types, ws_connect

pytestmark = pytest.mark.django_db(transaction=True)

DEEP = "[" * 10_000 + "]" * 10_000


def stream_body(world, **fields):
    return {"message": "Where is Paris?", "projectId": str(world["project"].id), **fields}


async def nothing_stored(world) -> bool:
    conversations = await Conversation.objects.filter(project=world["project"]).acount()
    messages = await Message.objects.filter(conversation__project=world["project"]).acount()
    return conversations == 0 and messages == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [("message", "Paris\x00"), ("message", "Paris \ud800"), ("projectId", "\x00"), ("projectId", "\udfff")],
    ids=["nul-message", "surrogate-message", "nul-project", "surrogate-project"],
)
async def test_nul_bytes_and_lone_surrogates_in_the_sse_request_are_rejected_not_500(
    world, scripted, field, value
):
    body = json.dumps(stream_body(world, **{field: value}))

    response = await world["client"].post("/api/chat/stream", body, content_type="application/json")

    assert response.status_code == 400
    error = response.json()
    assert error["code"] == "invalid_request"
    assert error["field"] == field
    assert await nothing_stored(world)


async def test_sse_body_nested_10000_deep_is_rejected_not_500(world, scripted):
    body = f'{{"message": "hi", "projectId": "{world["project"].id}", "extra": {DEEP}}}'

    response = await world["client"].post("/api/chat/stream", body, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert "nested" in response.json()["error"]


@pytest.mark.parametrize(
    "raw",
    [
        '{"type": "chat.message", "message": "Paris\\u0000", "projectId": "%(project)s"}',
        '{"type": "chat.message", "message": "Paris \\ud800", "projectId": "%(project)s"}',
        '{"type": "chat.message", "message": "hi", "projectId": "\\u0000"}',
        '{"type": "chat.message", "message": "hi", "projectId": "%(project)s", "x": ' + DEEP + "}",
        '{"type": "chat.subscribe", "conversationId": "\\u0000"}',
    ],
    ids=["nul-message", "surrogate-message", "nul-project", "deep-nesting", "nul-subscribe"],
)
async def test_websocket_chat_message_with_nul_surrogate_or_deep_nesting_gets_invalid_request_and_stays_open(
    world, scripted, raw
):
    scripted.turns.append(text("Paris is in France."))
    communicator = await ws_connect(world["user"])

    await communicator.send_to(text_data=raw % {"project": world["project"].id})
    refusal = await communicator.receive_json_from(timeout=10)
    await communicator.send_json_to(stream_body(world, type="chat.message"))
    frames = []
    while not frames or frames[-1]["type"] != "done":
        frames.append(await communicator.receive_json_from(timeout=10))

    assert refusal["type"] == "error"
    assert refusal["code"] == "invalid_request"
    assert "seq" not in refusal
    assert types(frames) == ["meta", "token", "done"]
    assert tokens(frames) == "Paris is in France."
    assert await Message.objects.filter(conversation__project=world["project"]).acount() == 2
    await communicator.disconnect()


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "Paris\x00"},
        {"query": "Paris \ud800"},
        {"query": "Paris", "types": ["\x00"]},
        {"entity_id": "paris", "relationship_type": "\x00"},
    ],
    ids=["nul-query", "surrogate-query", "nul-in-list", "nul-edges"],
)
async def test_nul_or_surrogate_in_arguments_a_model_passes_is_a_tool_error_and_the_turn_goes_on(
    world, agent, scripted, arguments
):
    name = "get_entity_edges" if "entity_id" in arguments else "hybrid_search"
    scripted.turns += [[tool_call(name, arguments, id="bad-1")], text("I could not search that.")]

    status, frames = await sse_turn(
        world["client"], stream_body(world, agentDefinitionId=str(agent.id), message="Find Paris")
    )

    assert status == 200
    tool_frames = [f for f in frames if f["type"] == "mcp_tool"]
    assert [f["status"] for f in tool_frames] == ["started", "error"]
    assert "cannot be stored" in tool_frames[1]["error"] or "not valid Unicode" in tool_frames[1]["error"]
    assert types(frames)[-2:] == ["token", "done"]
    assert frames[-1]["messageId"] is not None
    assert tokens(frames) == "I could not search that."
    stored = await adb(lambda: list(AgentRunToolCall.objects.filter(call_id="bad-1")))()
    assert len(stored) == 1 and stored[0].error


async def test_plain_chat_message_starting_with_1200_newlines_is_searched_not_a_retrieval_error(
    world, scripted
):
    scripted.turns.append(text("Paris is the capital of France."))

    status, frames = await sse_turn(world["client"], stream_body(world, message="\n" * 1200 + "Paris"))

    assert status == 200
    assert "error" not in types(frames)
    assert tokens(frames) == "Paris is the capital of France."
    answer = await Message.objects.filter(conversation__project=world["project"], role="assistant").aget()
    assert [e["key"] for e in answer.retrieval_context["entities"]][:1] == ["paris"]


async def test_plain_chat_message_of_only_whitespace_is_refused_as_empty(world, scripted):
    status, error = await sse_turn(world["client"], stream_body(world, message="\n" * 1200 + " \t"))

    assert status == 400
    assert error["code"] == "invalid_request"
    assert await nothing_stored(world)


async def test_escaped_surrogate_pairs_and_other_control_characters_are_still_accepted(world, scripted):
    scripted.turns.append(text("Noted."))
    message = "Paris \U0001f600 \x01 \ufffd"  # the client's JSON encoder sends the pair as \ud83d\ude00

    status, frames = await sse_turn(world["client"], stream_body(world, message=message))

    assert status == 200
    assert tokens(frames) == "Noted."
    stored = await Message.objects.filter(conversation__project=world["project"], role="user").aget()
    assert stored.content == message


@pytest.mark.parametrize("bad", ["\x00", "\ud800"], ids=["nul", "surrogate"])
async def test_nul_or_surrogate_in_a_models_text_is_stored_and_streamed_as_replacement_not_a_failed_turn(
    world, scripted, bad
):
    # The pause lets the partial-text saver (about once a second) store the text mid-turn too.
    scripted.turns.append([TextDelta(text=f"Paris{bad} is"), Delay(1.2), TextDelta(text=" in France.")])

    status, frames = await sse_turn(world["client"], stream_body(world))

    assert status == 200
    assert "error" not in types(frames)
    assert frames[-1]["messageId"] is not None
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert answer.content == "Paris\ufffd is in France."
    assert tokens(frames) == answer.content

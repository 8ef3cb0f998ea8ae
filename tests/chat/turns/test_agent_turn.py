"""The agent branch of a turn (apps/chat/agent_turn.py) end to end over SSE (agent-backed-chat requirements)."""

import pytest
from asgiref.sync import sync_to_async
from django.db import IntegrityError, InternalError, connection

from apps.agents.llm.scripted import error, text, tool_call
from apps.agents.models import AgentDefinition, AgentRun, AgentRunMessage, AgentRunToolCall
from apps.chat.models import Conversation, Message
from tests.chat.conftest import adb, agent_request, sse_turn, tokens, types, ws_connect, ws_turn
from tests.factories import make_project

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "Which country is Paris the capital of?"


# --- creating and continuing -----------------------------------------------------------------


async def test_create_agent_backed_conversation(world, agent, scripted):
    scripted.turns.append(text("Hello."))

    status, frames = await sse_turn(world["client"], agent_request(world, agent, QUESTION))

    conversation = await Conversation.objects.aget(id=frames[0]["conversationId"])
    assert status == 200
    assert conversation.agent_definition_id == agent.id
    assert frames[0]["agentDefinitionId"] == str(agent.id)
    assert frames[0]["runId"] == frames[-1]["runId"]
    assert await AgentRun.objects.filter(id=frames[0]["runId"], conversation_id=conversation.id).aexists()


async def test_continue_existing_agent_backed_conversation_ignores_agent_in_request(world, agent, scripted):
    other = await AgentDefinition.objects.acreate(project=world["project"], name="other", tools=[])
    scripted.turns += [text("first"), text("second")]
    _, frames = await sse_turn(world["client"], agent_request(world, agent, QUESTION))
    conversation_id = frames[0]["conversationId"]

    _, second = await sse_turn(
        world["client"],
        {"message": "again", "conversationId": conversation_id, "agentDefinitionId": str(other.id)},
    )

    assert second[0]["agentDefinitionId"] == str(agent.id)
    run = await AgentRun.objects.aget(id=second[0]["runId"])
    assert run.agent_definition_id == agent.id
    assert (await Conversation.objects.aget(id=conversation_id)).agent_definition_id == agent.id


@pytest.mark.parametrize("which", ["unknown", "other-project", "not-a-uuid"])
async def test_invalid_agent_definition_id_returns_400_and_creates_nothing(world, scripted, which):
    if which == "unknown":
        definition_id = "00000000-0000-0000-0000-000000000000"
    elif which == "other-project":
        foreign = await adb(make_project)()
        definition_id = str((await AgentDefinition.objects.acreate(project=foreign, name="theirs")).id)
    else:
        definition_id = "nope"

    status, body = await sse_turn(
        world["client"],
        {"message": "hi", "projectId": str(world["project"].id), "agentDefinitionId": definition_id},
    )

    assert status == 400
    assert body == {"error": "agent definition not found", "code": "agent_definition_not_found"}
    assert not await Conversation.objects.aexists()
    assert not await Message.objects.aexists()


# --- the streaming flow ----------------------------------------------------------------------


async def test_agent_backed_streaming_flow_maps_callback_events_to_frames(world, agent, scripted):
    paris_id = str(world["paris"].id)
    scripted.turns += [
        [text("Let me look. ")[0], tool_call("get_entity_edges", {"entity_id": "paris"}, id="call-1")],
        text(
            "[Paris](entity:",
            paris_id,
            ") is the capital of ",
            f"[France](entity:{world['france'].id}).",
            " Also [Rome](entity:x).",
        ),
    ]

    status, frames = await sse_turn(world["client"], agent_request(world, agent, QUESTION))

    assert status == 200
    assert types(frames)[0] == "meta" and types(frames)[-1] == "done"
    tool_frames = [f for f in frames if f["type"] == "mcp_tool"]
    assert [(f["tool"], f["status"], f["callId"]) for f in tool_frames] == [
        ("get_entity_edges", "started", "call-1"),
        ("get_entity_edges", "completed", "call-1"),
    ]
    assert tool_frames[0]["input"] == {"entity_id": "paris"}
    assert tool_frames[1]["result"]["edges"][0]["other"]["key"] == "france"
    started_at = types(frames).index("mcp_tool")
    assert types(frames)[1:started_at] == ["token"]
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert tokens(frames) == answer.content
    assert answer.content == (
        f"Let me look. [Paris](entity:{paris_id}) is the capital of [France](entity:{world['france'].id}). Also Rome."
    )
    assert [c["key"] for c in frames[-1]["citations"]] == ["paris", "france"]
    assert answer.citations == frames[-1]["citations"]


async def test_tool_call_error_event_is_not_fatal(world, agent, scripted):
    scripted.turns += [
        [tool_call("get_entity_edges", {"entity_id": "atlantis"}, id="c1")],
        [tool_call("get_entity_edges", {"entity_id": "paris", "direction": "sideways"}, id="c2")],
        text("Atlantis is not in the graph."),
    ]

    _, frames = await sse_turn(world["client"], agent_request(world, agent, QUESTION))

    tool_frames = [(f["callId"], f["status"]) for f in frames if f["type"] == "mcp_tool"]
    assert tool_frames == [("c1", "started"), ("c1", "error"), ("c2", "started"), ("c2", "error")]
    errors = [f["error"] for f in frames if f["type"] == "mcp_tool" and f["status"] == "error"]
    assert "atlantis" in errors[0] and "direction" in errors[1]
    assert types(frames)[-1] == "done" and frames[-1]["messageId"]
    assert "error" not in types(frames)


async def _search_turn(world, agent, scripted):
    scripted.turns += [[tool_call("hybrid_search", {"query": "Paris"}, id="s1")], text("Found Paris.")]
    _, frames = await sse_turn(world["client"], agent_request(world, agent, QUESTION))
    rows = [
        m
        async for m in Message.objects.filter(conversation_id=frames[0]["conversationId"]).order_by(
            "created_at"
        )
    ]
    return frames, rows


async def test_user_message_persisted_to_chat_tables(world, agent, scripted):
    frames, rows = await _search_turn(world, agent, scripted)

    assert (rows[0].role, rows[0].content) == ("user", "Which country is Paris the capital of?")
    assert frames[0]["messageId"] == str(rows[0].id)


async def test_assistant_response_persisted_to_chat_tables(world, agent, scripted):
    frames, rows = await _search_turn(world, agent, scripted)

    assert [r.role for r in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[1].tool_calls[0]["id"] == "s1" and rows[1].tool_calls[0]["name"] == "hybrid_search"
    assert rows[2].tool_calls[0]["id"] == "s1"
    assert rows[3].content == "Found Paris."
    assert rows[3].retrieval_context == {
        "agent_run_id": frames[-1]["runId"],
        "graph_version": 0,
        "entity_ids": [str(world["paris"].id)],
    }
    assert frames[-1]["messageId"] == str(rows[3].id)


async def test_agent_execution_trace_persisted_to_agent_tables(world, agent, scripted):
    frames, _ = await _search_turn(world, agent, scripted)

    run = await AgentRun.objects.aget(id=frames[-1]["runId"])
    assert run.status == "success" and run.step_count == 2 and run.completed_at is not None
    calls = [c async for c in AgentRunToolCall.objects.filter(run=run)]
    assert [(c.tool_name, c.call_id, c.input) for c in calls] == [("hybrid_search", "s1", {"query": "Paris"})]
    assert any(r["key"] == "paris" for r in calls[0].output["results"])
    roles = [m.role async for m in AgentRunMessage.objects.filter(run=run).order_by("created_at")]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_tool_call_started_event_carries_tool_and_input(world, agent, scripted):
    scripted.turns += [[tool_call("list_entity_types", {}, id="t1")], text("Two types.")]

    _, frames = await sse_turn(world["client"], agent_request(world, agent, QUESTION))

    started = next(f for f in frames if f["type"] == "mcp_tool")
    assert started == {
        "type": "mcp_tool",
        "seq": 2,
        "tool": "list_entity_types",
        "callId": "t1",
        "status": "started",
        "input": {},
    }


async def test_tool_call_completed_event_carries_the_tool_output(world, agent, scripted):
    scripted.turns += [[tool_call("list_entity_types", {}, id="t1")], text("Two types.")]

    _, frames = await sse_turn(world["client"], agent_request(world, agent, QUESTION))

    completed = [f for f in frames if f["type"] == "mcp_tool"][1]
    assert completed["status"] == "completed" and completed["tool"] == "list_entity_types"
    assert sorted(completed["result"]["types"], key=lambda t: t["type"]) == [
        {"type": "City", "count": 1},
        {"type": "Country", "count": 1},
    ]
    assert "input" not in completed and "error" not in completed


async def test_tool_results_are_real_graph_data(world, agent, scripted):
    scripted.turns += [[tool_call("get_entity_edges", {"entity_id": "paris"}, id="e")], text("ok")]

    _, frames = await sse_turn(world["client"], agent_request(world, agent, QUESTION))

    completed = next(f for f in frames if f["type"] == "mcp_tool" and f["status"] == "completed")
    assert completed["result"]["entity"]["id"] == str(world["paris"].id)
    assert [(e["type"], e["direction"], e["other"]["id"]) for e in completed["result"]["edges"]] == [
        ("CAPITAL_OF", "out", str(world["france"].id))
    ]


# --- history -----------------------------------------------------------------------------------


async def test_first_message_in_conversation_goes_alone(world, agent, scripted):
    scripted.turns.append(text("hi"))

    await sse_turn(world["client"], agent_request(world, agent, "hello"))

    sent = [(m.role, m.content) for m in scripted.calls[0].messages if m.role != "system"]
    assert sent == [("user", "hello")]


async def test_load_conversation_history_for_agent_and_tool_results_appear_in_subsequent_context(
    world, agent, scripted
):
    scripted.turns += [
        [tool_call("hybrid_search", {"query": "Paris"}, id="s1")],
        text("Paris is a city."),
        text("yes"),
    ]
    _, frames = await sse_turn(world["client"], agent_request(world, agent, "Tell me about Paris"))

    await sse_turn(world["client"], {"message": "Is it big?", "conversationId": frames[0]["conversationId"]})

    sent = [m for m in scripted.calls[2].messages if m.role != "system"]
    assert [m.role for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[0].content == "Tell me about Paris" and sent[-1].content == "Is it big?"
    assert sent[1].tool_calls[0].id == "s1" and sent[2].tool_call_id == "s1"
    assert "paris" in sent[2].content
    assert sent[3].content == "Paris is a city."


async def test_conversation_history_respects_turn_limit(world, agent, scripted):
    await AgentDefinition.objects.filter(id=agent.id).aupdate(history_limit=4)
    scripted.turns += [text(f"answer {i}") for i in range(4)]
    _, frames = await sse_turn(world["client"], agent_request(world, agent, "question 0"))
    for i in range(1, 4):
        await sse_turn(
            world["client"], {"message": f"question {i}", "conversationId": frames[0]["conversationId"]}
        )

    sent = [m.content for m in scripted.calls[3].messages if m.role != "system"]

    assert sent == ["question 1", "answer 1", "question 2", "answer 2", "question 3"]


# --- failures and limits -----------------------------------------------------------------------


async def test_llm_failure_propagates_with_error_and_done_without_message(world, agent, scripted):
    scripted.turns.append(error("quota exceeded", status=429))

    _, frames = await sse_turn(world["client"], agent_request(world, agent, QUESTION))

    assert types(frames) == ["meta", "error", "done"]
    assert frames[1]["code"] == "llm_error" and frames[2]["messageId"] is None
    roles = [m.role async for m in Message.objects.filter(conversation_id=frames[0]["conversationId"])]
    assert roles == ["user"]
    run = await AgentRun.objects.aget(id=frames[0]["runId"])
    assert run.status == "error" and run.stop_reason == "llm_error"


async def test_iteration_limit_prevents_infinite_loop(world, agent, scripted):
    await AgentDefinition.objects.filter(id=agent.id).aupdate(max_steps=3)
    scripted.turns += [
        [text("Searching… ")[0], tool_call("hybrid_search", {"query": f"q{i}"}, id=f"s{i}")]
        for i in range(10)
    ]

    _, frames = await sse_turn(world["client"], agent_request(world, agent, QUESTION))

    error_frame = next(f for f in frames if f["type"] == "error")
    assert error_frame["code"] == "max_steps"
    assert types(frames)[-1] == "done"
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert answer.content == tokens(frames)
    assert answer.retrieval_context["stop_reason"] == "max_steps"
    run = await AgentRun.objects.aget(id=frames[0]["runId"])
    assert run.stop_reason == "max_steps" and run.status != "running"


async def test_doom_loop_is_stopped_with_its_own_code(world, agent, scripted):
    scripted.turns += [[tool_call("hybrid_search", {"query": "same"})] for _ in range(6)]

    _, frames = await sse_turn(world["client"], agent_request(world, agent, QUESTION))

    assert next(f for f in frames if f["type"] == "error")["code"] == "doom_loop"
    run = await AgentRun.objects.aget(id=frames[0]["runId"])
    assert run.stop_reason == "doom_loop" and run.status == "error"


# --- invariants (conversation-state.spec.md) ---------------------------------------------------


async def test_messages_are_append_only(world, agent, scripted):
    scripted.turns.append(text("fixed"))
    _, frames = await sse_turn(world["client"], agent_request(world, agent, QUESTION))

    def overwrite():
        with pytest.raises((IntegrityError, InternalError)):
            Message.objects.filter(id=frames[-1]["messageId"]).update(content="changed")
        connection.close()

    await sync_to_async(overwrite)()

    assert (await Message.objects.aget(id=frames[-1]["messageId"])).content == "fixed"


async def test_messages_have_unique_stable_ids_in_chronological_order(world, agent, scripted):
    scripted.turns += [text("a1"), text("a2"), text("a3")]
    _, frames = await sse_turn(world["client"], agent_request(world, agent, "q1"))
    conversation_id = frames[0]["conversationId"]
    ids_before = [
        m.id async for m in Message.objects.filter(conversation_id=conversation_id).order_by("created_at")
    ]
    await sse_turn(world["client"], {"message": "q2", "conversationId": conversation_id})
    await sse_turn(world["client"], {"message": "q3", "conversationId": conversation_id})

    rows = [
        m async for m in Message.objects.filter(conversation_id=conversation_id).order_by("created_at", "id")
    ]

    assert [r.content for r in rows] == ["q1", "a1", "q2", "a2", "q3", "a3"]
    assert [r.id for r in rows[:2]] == ids_before
    assert len({r.id for r in rows}) == 6


async def test_greeting_is_answered_in_chat_mode_without_tools(world, agent, scripted):
    scripted.turns.append(text("Hello! How can I help with the graph?"))

    _, frames = await sse_turn(world["client"], agent_request(world, agent, "hello, how are you?"))

    assert "mcp_tool" not in types(frames)
    rows = [m.role async for m in Message.objects.filter(conversation_id=frames[0]["conversationId"])]
    assert sorted(rows) == ["assistant", "user"]


async def test_the_next_message_may_follow_done_at_once(world, agent, scripted):
    scripted.turns += [text("first"), text("second")]
    communicator = await ws_connect(world["user"])
    first = await ws_turn(communicator, {"type": "chat.message", **agent_request(world, agent, QUESTION)})

    second = await ws_turn(
        communicator,
        {"type": "chat.message", "message": "and then?", "conversationId": first[0]["conversationId"]},
    )
    await communicator.send_json_to({"type": "chat.cancel", "conversationId": first[0]["conversationId"]})
    not_running = await communicator.receive_json_from(timeout=5)

    assert types(second) == ["meta", "token", "done"] and tokens(second) == "second"
    assert not_running["code"] == "not_running"
    await communicator.disconnect()

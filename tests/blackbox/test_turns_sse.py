"""Turns over Server-Sent Events (``POST /api/chat/stream``, docs/protocol.md §2 StreamRequest and
§3): new and follow-up, plain and agent, a failing model, a failing tool, cancel, delete, and
every refusal before anything is stored."""

from __future__ import annotations

import uuid

from tests.blackbox.clients import Api, form_errors, resubmit
from tests.blackbox.covers import covers
from tests.blackbox.model import ScriptedModel
from tests.blackbox.shapes import Turn
from tests.blackbox.world import World, create_user

STREAM = "POST /api/chat/stream"
CONVERSATION = "GET /api/chat/conversations/{conversation_id}"
CANCEL = "POST /api/chat/conversations/{conversation_id}/cancel"


def stored(api: Api, conversation_id: str) -> dict:
    return api.call(CONVERSATION, 200, conversation_id=conversation_id).json()


@covers("POST /api/chat/stream", "200")
def test_a_new_plain_conversation_is_answered_over_sse(world: World) -> None:
    ada = world.api("ada")

    turn = ada.stream({"message": "Who wrote the first program?", "projectId": world.project_id})

    assert turn.error is None
    assert (turn.meta["agentDefinitionId"], turn.meta["runId"], turn.meta["model"]) == (
        None,
        None,
        "openai/test-model",
    )
    assert turn.done["messageId"] is not None and turn.done["runId"] is None
    conversation = stored(ada, turn.meta["conversationId"])
    assert (
        conversation["agentDefinitionId"] is None and conversation["title"] == "Who wrote the first program?"
    )
    assert [m["role"] for m in conversation["messages"]] == ["user", "assistant"]
    assert [m["id"] for m in conversation["messages"]] == [turn.meta["messageId"], turn.done["messageId"]]
    answer = conversation["messages"][1]
    assert answer["content"] == turn.text == "Here is the answer."
    assert answer["retrievalContext"]["strategy"] == "always_retrieve"
    assert answer["usage"]["outputTokens"] > 0  # the tokens its model reported (#50)


@covers("POST /api/chat/stream", "200")
def test_a_plain_follow_up_is_answered_in_the_same_conversation(world: World) -> None:
    ada = world.api("ada")
    first = ada.stream({"message": "Where did Ada Lovelace live?", "projectId": world.project_id})

    follow_up = ada.stream(
        {
            "message": "And Babbage?",
            "conversationId": first.meta["conversationId"],
            "agentDefinitionId": world.agents["graph-query-agent"],
        }
    )

    assert follow_up.error is None
    assert follow_up.meta["conversationId"] == first.meta["conversationId"]
    assert follow_up.meta["agentDefinitionId"] is None  # the conversation keeps its own (no) agent
    messages = stored(ada, first.meta["conversationId"])["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[-1]["id"] == follow_up.done["messageId"] and messages[-1]["content"] == follow_up.text


@covers("POST /api/chat/stream", "200")
def test_a_new_agent_conversation_calls_a_tool_and_cites_what_it_found(world: World) -> None:
    ada = world.api("ada")

    turn = ada.stream(
        {
            "message": '#tool get_entity_edges {"entity_id": "charles-babbage"}\nWhat did Babbage design?',
            "projectId": world.project_id,
            "agentDefinitionId": world.agents["graph-query-agent"],
        }
    )

    assert turn.error is None
    assert turn.meta["agentDefinitionId"] == world.agents["graph-query-agent"] and turn.meta["runId"]
    tools = turn.of_type("mcp_tool")
    assert [(f["tool"], f["status"]) for f in tools] == [
        ("get_entity_edges", "started"),
        ("get_entity_edges", "completed"),
    ]
    assert tools[0]["callId"] == tools[1]["callId"] and tools[0]["input"] == {"entity_id": "charles-babbage"}
    assert tools[1]["result"]["entity"]["key"] == "charles-babbage"
    assert turn.done["runId"] == turn.meta["runId"]
    assert [c["key"] for c in turn.done["citations"]] == ["charles-babbage"]
    answer = stored(ada, turn.meta["conversationId"])["messages"][-1]
    assert (answer["id"], answer["content"]) == (turn.done["messageId"], turn.text)
    assert turn.text == f"Found [Charles Babbage](entity:{world.entities['charles-babbage']})."


@covers("POST /api/chat/stream", "200")
def test_an_agent_follow_up_keeps_the_conversations_agent_and_starts_a_new_run(world: World) -> None:
    ada = world.api("ada")
    first = ada.stream(
        {
            "message": "Hello agent",
            "projectId": world.project_id,
            "agentDefinitionId": world.agents["graph-query-agent"],
        }
    )

    follow_up = ada.stream(
        {
            "message": '#tool search_entities {"query": "London"}\nAnd London?',
            "conversationId": first.meta["conversationId"],
        }
    )

    assert follow_up.error is None
    assert follow_up.meta["agentDefinitionId"] == world.agents["graph-query-agent"]
    assert follow_up.meta["runId"] not in {None, first.meta["runId"]}
    assert [c["key"] for c in follow_up.done["citations"]] == ["london"]
    messages = stored(ada, first.meta["conversationId"])["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "tool", "assistant"]


@covers("POST /api/chat/stream", "200")
def test_a_tool_error_is_not_fatal_and_the_agent_answers(world: World) -> None:
    ada = world.api("ada")

    turn = ada.stream(
        {
            "message": '#tool get_entity_edges {"entity_id": "london", "direction": "sideways"}\nEdges?',
            "projectId": world.project_id,
            "agentDefinitionId": world.agents["graph-query-agent"],
        }
    )

    assert turn.error is None
    tools = turn.of_type("mcp_tool")
    assert [f["status"] for f in tools] == ["started", "error"]
    assert "direction" in tools[1]["error"]
    assert turn.done["messageId"] is not None and turn.text == "The tool said no."


@covers("POST /api/chat/stream", "200")
def test_a_failing_model_ends_the_turn_with_llm_error_and_stores_only_the_question(world: World) -> None:
    ada = world.api("ada")

    plain = ada.stream({"message": "#fail\nPlain, please", "projectId": world.project_id})
    agent = ada.stream(
        {
            "message": "#fail\nAgent, please",
            "projectId": world.project_id,
            "agentDefinitionId": world.agents["graph-query-agent"],
        }
    )

    for turn in (plain, agent):
        assert turn.error is not None and turn.error["code"] == "llm_error"
        assert turn.done["messageId"] is None
        messages = stored(ada, turn.meta["conversationId"])["messages"]
        assert [(m["role"], m["id"]) for m in messages] == [("user", turn.meta["messageId"])]
    run = ada.call("GET /api/agent-runs/{run_id}", 200, run_id=agent.meta["runId"]).json()
    assert run["status"] == "error"


@covers("POST /api/chat/conversations/{conversation_id}/cancel", "200")
@covers("POST /api/chat/stream", "409 turn_in_progress")
def test_a_running_turn_refuses_a_second_message_and_stops_when_cancelled(
    world: World, model: ScriptedModel
) -> None:
    ada = world.api("ada")
    with ada.streaming(
        {"message": "#hold sse-cancel\nTake your time", "projectId": world.project_id}
    ) as frames:
        started = [next(frames), next(frames)]  # meta, then the first text
        conversation_id = started[0]["conversationId"]
        ada.call(
            STREAM, 409, "turn_in_progress", json={"message": "Me too", "conversationId": conversation_id}
        )

        cancelled = ada.call(CANCEL, 200, conversation_id=conversation_id).json()

        turn = Turn([*started, *frames])
    model.release("sse-cancel")

    assert cancelled == {"cancelled": True}
    assert turn.error is not None and turn.error["code"] == "cancelled"
    assert turn.text == "Part one. "
    messages = stored(ada, conversation_id)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["id"] == turn.done["messageId"] and messages[1]["content"] == "Part one. "
    assert ada.call(CANCEL, 200, conversation_id=conversation_id).json() == {"cancelled": False}


@covers("DELETE /api/chat/conversations/{conversation_id}", "204")
def test_deleting_a_conversation_during_its_turn_stops_it_and_stores_nothing(
    world: World, model: ScriptedModel
) -> None:
    ada = world.api("ada")
    body = {
        "message": "#hold sse-delete\nLong one",
        "projectId": world.project_id,
        "agentDefinitionId": world.agents["graph-query-agent"],
    }
    with ada.streaming(body) as frames:
        started = [next(frames), next(frames)]
        conversation_id = started[0]["conversationId"]

        ada.call("DELETE /api/chat/conversations/{conversation_id}", 204, conversation_id=conversation_id)

        turn = Turn([*started, *frames])
    model.release("sse-delete")

    assert turn.error is not None and turn.error["code"] == "conversation_deleted"
    assert turn.done["messageId"] is None
    ada.call(CONVERSATION, 404, "conversation_not_found", conversation_id=conversation_id)


@covers(
    "POST /api/chat/stream",
    "400 invalid_request",
    "400 message_too_long",
    "400 agent_definition_not_found",
    "404 project_not_found",
    "404 conversation_not_found",
)
def test_a_refused_stream_request_stores_nothing(world: World) -> None:
    bob = world.api("bob")
    before = bob.call("GET /api/chat/conversations", 200).json()["count"]

    bob.call(STREAM, 400, "invalid_request", json={"message": "", "projectId": world.project_id})
    bob.call(STREAM, 400, "invalid_request", json={"message": "No project"})
    bob.call(
        STREAM, 400, "invalid_request", json={"message": "Nul \u0000 inside", "projectId": world.project_id}
    )
    bob.call(STREAM, 400, "message_too_long", json={"message": "x" * 32001, "projectId": world.project_id})
    unknown = bob.call(
        STREAM,
        400,
        "agent_definition_not_found",
        json={"message": "Hi", "projectId": world.project_id, "agentDefinitionId": str(uuid.uuid4())},
    ).json()
    assert unknown == {"error": "agent definition not found", "code": "agent_definition_not_found"}
    bob.call(
        STREAM,
        400,
        "agent_definition_not_found",
        json={"message": "Hi", "projectId": world.project_id, "agentDefinitionId": "not-a-uuid"},
    )
    bob.call(STREAM, 404, "project_not_found", json={"message": "Hi", "projectId": str(uuid.uuid4())})
    world.api("dan").call(
        STREAM, 404, "project_not_found", json={"message": "Hi", "projectId": world.project_id}
    )
    bob.call(
        STREAM, 404, "conversation_not_found", json={"message": "Hi", "conversationId": str(uuid.uuid4())}
    )

    assert bob.call("GET /api/chat/conversations", 200).json()["count"] == before


@covers("POST /api/chat/stream", "400 agent_definition_not_found")
def test_another_projects_agent_definition_is_not_found(world: World, admin: Api) -> None:
    demo_agents = admin.call(
        "GET /api/projects/{project_id}/agent-definitions", 200, project_id="demo"
    ).json()
    demo_agent = demo_agents["items"][0]["id"]

    world.api("ada").call(
        STREAM,
        400,
        "agent_definition_not_found",
        json={"message": "Hi", "projectId": world.project_id, "agentDefinitionId": demo_agent},
    )


@covers("POST /api/chat/stream", "429 rate_limited")
def test_a_user_over_the_rate_limit_is_refused(world: World, admin: Api) -> None:
    create_user(admin, "rita")
    rita = world.fresh("rita")
    project = rita.call("POST /api/projects", 201, json={"name": "Rita's"}).json()["id"]
    conversation_id = rita.stream({"message": "Message 1", "projectId": project}).meta["conversationId"]
    for n in range(2, 31):  # KGCHAT_TURNS_PER_MINUTE's default: 30
        rita.stream({"message": f"Message {n}", "conversationId": conversation_id})

    rita.call(STREAM, 429, "rate_limited", json={"message": "Message 31", "conversationId": conversation_id})
    rita.call(STREAM, 429, "rate_limited", json={"message": "A new one", "projectId": project})

    assert len(stored(rita, conversation_id)["messages"]) == 60
    rita.close()


@covers("POST /api/chat/stream", "409 agent_definition_disabled")
def test_a_definition_an_operator_disabled_refuses_new_and_follow_up_turns(world: World, admin: Api) -> None:
    bob = world.api("bob")
    agent = bob.call(
        "POST /api/projects/{project_id}/agent-definitions",
        201,
        json={"name": "soon-disabled", "description": "x", "systemPrompt": "x", "tools": ["search_entities"]},
        project_id=world.project_id,
    ).json()
    conversation_id = bob.stream(
        {"message": "Before", "projectId": world.project_id, "agentDefinitionId": agent["id"]}
    ).meta["conversationId"]

    disable_in_admin(admin, agent["id"], "retired by the operator")

    refused = bob.call(
        STREAM, 409, "agent_definition_disabled", json={"message": "After", "conversationId": conversation_id}
    ).json()
    assert "retired by the operator" in refused["error"]
    bob.call(
        STREAM,
        409,
        "agent_definition_disabled",
        json={"message": "New", "projectId": world.project_id, "agentDefinitionId": agent["id"]},
    )
    assert len(stored(bob, conversation_id)["messages"]) == 2


def disable_in_admin(admin: Api, definition_id: str, reason: str) -> None:
    """The operator's way to disable an agent definition: its admin page's "disabled reason"."""
    answer = resubmit(
        admin, f"/admin/agents/agentdefinition/{definition_id}/change/", {"disabled_reason": reason}
    )
    assert answer.status_code == 302, form_errors(answer.text)

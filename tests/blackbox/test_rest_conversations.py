"""Conversations after their turns, over REST: list, search, read, rename, delete, export, share,
feedback, the audit trail of a run and a project's usage."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, timedelta

import pytest

from tests.blackbox.covers import covers
from tests.blackbox.shapes import Turn
from tests.blackbox.world import World

CONVERSATION = "/api/chat/conversations/{conversation_id}"


@dataclass
class Talk:
    plain: Turn
    agent: Turn


@pytest.fixture(scope="module")
def talk(world: World) -> Talk:
    """ada's two conversations in Atlas: a plain one, then an agent one with a tool call."""
    ada = world.api("ada")
    plain = ada.stream({"message": "Tell me about London and its people", "projectId": world.project_id})
    agent = ada.stream(
        {
            "message": '#tool get_entity_edges {"entity_id": "ada-lovelace"}\nWho did Ada work with?',
            "projectId": world.project_id,
            "agentDefinitionId": world.agents["graph-query-agent"],
        }
    )
    assert plain.error is None and agent.error is None
    return Talk(plain=plain, agent=agent)


@covers("GET /api/chat/conversations", "200")
def test_my_conversations_are_listed_most_recently_active_first(world: World, talk: Talk) -> None:
    listed = (
        world.api("ada")
        .call("GET /api/chat/conversations", 200, params={"projectId": world.project_id})
        .json()
    )

    ids = [c["id"] for c in listed["items"]]
    assert ids.index(talk.agent.meta["conversationId"]) < ids.index(talk.plain.meta["conversationId"])
    assert all(c["projectId"] == world.project_id for c in listed["items"])
    others = world.api("bob").call("GET /api/chat/conversations", 200).json()
    assert talk.plain.meta["conversationId"] not in {c["id"] for c in others["items"]}


@covers("GET /api/chat/conversations", "400 invalid_request")
def test_my_conversations_are_searched_with_a_marked_snippet(world: World, talk: Talk) -> None:
    ada = world.api("ada")

    hits = ada.call("GET /api/chat/conversations", 200, params={"q": "London"}).json()

    assert [c["id"] for c in hits["items"]] == [talk.plain.meta["conversationId"]]
    assert "<mark>London</mark>" in hits["items"][0]["snippet"]
    ada.call("GET /api/chat/conversations", 400, "invalid_request", params={"q": "x" * 1001})


@covers("GET /api/chat/conversations/{conversation_id}", "200", "404 conversation_not_found")
def test_a_conversation_is_read_with_its_messages_by_its_owner_only(world: World, talk: Talk) -> None:
    conversation_id = talk.agent.meta["conversationId"]

    read = world.api("ada").call("GET " + CONVERSATION, 200, conversation_id=conversation_id).json()

    roles = [m["role"] for m in read["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    answer = read["messages"][-1]
    assert answer["id"] == talk.agent.done["messageId"]
    assert answer["content"] == talk.agent.text
    assert answer["retrievalContext"]["agent_run_id"] == talk.agent.meta["runId"]
    assert answer["citations"] == talk.agent.done["citations"]
    assert read["messages"][1]["toolCalls"][0]["name"] == "get_entity_edges"
    assert read["agentDefinitionId"] == world.agents["graph-query-agent"]
    world.api("bob").call(
        "GET " + CONVERSATION, 404, "conversation_not_found", conversation_id=conversation_id
    )
    world.api("dan").call(
        "GET " + CONVERSATION, 404, "conversation_not_found", conversation_id=conversation_id
    )


@covers("PATCH /api/chat/conversations/{conversation_id}", "200", "400 invalid_request")
@covers("DELETE /api/chat/conversations/{conversation_id}", "204")
def test_a_conversation_is_renamed_with_its_title_kept_whole_and_deleted(world: World) -> None:
    ada = world.api("ada")
    turn = ada.stream({"message": "A question to forget", "projectId": world.project_id})
    conversation_id = turn.meta["conversationId"]
    title = "Renamed " + "t" * 192

    renamed = ada.call(
        "PATCH " + CONVERSATION, 200, json={"title": title}, conversation_id=conversation_id
    ).json()
    too_long = ada.call(
        "PATCH " + CONVERSATION,
        400,
        "invalid_request",
        json={"title": title + "!"},
        conversation_id=conversation_id,
    ).json()
    ada.call("DELETE " + CONVERSATION, 204, conversation_id=conversation_id)

    assert renamed["title"] == title
    assert too_long["field"] == "title"
    ada.call("GET " + CONVERSATION, 404, "conversation_not_found", conversation_id=conversation_id)
    ada.call("DELETE " + CONVERSATION, 404, "conversation_not_found", conversation_id=conversation_id)


@covers("GET /api/chat/conversations/{conversation_id}/export", "200", "400 invalid_request")
def test_a_conversation_is_exported_as_markdown_or_json(world: World, talk: Talk) -> None:
    ada = world.api("ada")
    export = "GET /api/chat/conversations/{conversation_id}/export"
    conversation_id = talk.agent.meta["conversationId"]

    markdown = ada.call(export, 200, params={"format": "markdown"}, conversation_id=conversation_id)
    as_json = ada.call(export, 200, params={"format": "json"}, conversation_id=conversation_id)

    assert markdown.headers["content-disposition"].startswith("attachment")
    assert "## You" in markdown.text and "## Assistant" in markdown.text and "<details>" in markdown.text
    data = as_json.json()
    assert set(data) == {"conversation", "messages", "runIds", "exportedAt"}
    assert data["runIds"] == [talk.agent.meta["runId"]]
    ada.call(export, 400, "invalid_request", params={"format": "pdf"}, conversation_id=conversation_id)


@covers("POST /api/chat/conversations/{conversation_id}/shares", "201", "400 invalid_request")
@covers("GET /api/chat/conversations/{conversation_id}/shares", "200")
@covers("GET /api/shares/{token}", "200", "404 share_not_found")
@covers("DELETE /api/chat/conversations/{conversation_id}/shares/{share_id}", "204", "404 share_not_found")
def test_a_share_link_shows_the_conversation_to_members_until_revoked(world: World, talk: Talk) -> None:
    ada = world.api("ada")
    conversation_id = talk.plain.meta["conversationId"]
    shares = "/api/chat/conversations/{conversation_id}/shares"

    share = ada.call(
        "POST " + shares, 201, json={"expiresInHours": 24}, conversation_id=conversation_id
    ).json()
    seen = world.api("cy").call("GET /api/shares/{token}", 200, token=share["token"]).json()
    listed = ada.call("GET " + shares, 200, conversation_id=conversation_id).json()

    assert share["url"].endswith(f"/share/{share['token']}") and share["status"] == "active"
    assert seen["id"] == conversation_id and seen["sharedBy"] == "ada"
    assert [m["content"] for m in seen["messages"]][-1] == talk.plain.text
    assert [s["id"] for s in listed["items"]] == [share["id"]] and "token" not in listed["items"][0]
    world.api("dan").call("GET /api/shares/{token}", 404, "share_not_found", token=share["token"])
    ada.call("DELETE " + shares + "/{share_id}", 204, conversation_id=conversation_id, share_id=share["id"])
    world.api("cy").call("GET /api/shares/{token}", 404, "share_not_found", token=share["token"])
    ada.call(
        "DELETE " + shares + "/{share_id}",
        404,
        "share_not_found",
        conversation_id=conversation_id,
        share_id=str(uuid.uuid4()),
    )
    ada.call(
        "POST " + shares, 400, "invalid_request", json={"expiresInHours": 0}, conversation_id=conversation_id
    )


@covers("POST /api/chat/conversations/{conversation_id}/shares", "409 too_many_shares")
def test_a_conversation_has_at_most_100_active_shares(world: World) -> None:
    ada = world.api("ada")
    conversation_id = ada.stream({"message": "Share me widely", "projectId": world.project_id}).meta[
        "conversationId"
    ]
    shares = "POST /api/chat/conversations/{conversation_id}/shares"
    for _ in range(100):
        ada.call(shares, 201, json={}, conversation_id=conversation_id)

    ada.call(shares, 409, "too_many_shares", json={}, conversation_id=conversation_id)


@covers("PUT /api/chat/messages/{message_id}/feedback", "200", "400 not_an_answer", "404 message_not_found")
@covers("DELETE /api/chat/messages/{message_id}/feedback", "204")
def test_feedback_is_set_on_an_answer_replaced_and_cleared(world: World, talk: Talk) -> None:
    ada = world.api("ada")
    feedback = "/api/chat/messages/{message_id}/feedback"
    answer = talk.agent.done["messageId"]

    ada.call("PUT " + feedback, 200, json={"rating": "down"}, message_id=answer)
    replaced = ada.call(
        "PUT " + feedback, 200, json={"rating": "up", "comment": "Right."}, message_id=answer
    ).json()
    ada.call("DELETE " + feedback, 204, message_id=answer)

    assert (replaced["messageId"], replaced["rating"], replaced["comment"], replaced["runId"]) == (
        answer,
        "up",
        "Right.",
        talk.agent.meta["runId"],
    )
    read = ada.call("GET " + CONVERSATION, 200, conversation_id=talk.agent.meta["conversationId"]).json()
    assert read["messages"][-1]["feedback"] is None
    ada.call(
        "PUT " + feedback,
        400,
        "not_an_answer",
        json={"rating": "up"},
        message_id=talk.agent.meta["messageId"],
    )
    ada.call("PUT " + feedback, 404, "message_not_found", json={"rating": "up"}, message_id=str(uuid.uuid4()))
    world.api("dan").call(
        "PUT " + feedback, 404, "message_not_found", json={"rating": "up"}, message_id=answer
    )
    ada.call("PUT " + feedback, 400, "invalid_request", json={"rating": "meh"}, message_id=answer)


@covers("GET /api/agent-runs/{run_id}", "200", "404 agent_run_not_found")
def test_an_agent_runs_audit_trail_shows_its_tool_calls(world: World, talk: Talk) -> None:
    run = world.api("ada").call("GET /api/agent-runs/{run_id}", 200, run_id=talk.agent.meta["runId"]).json()

    assert (run["status"], run["conversationId"], run["model"]) == (
        "success",
        talk.agent.meta["conversationId"],
        "openai/test-model",
    )
    assert [c["toolName"] for c in run["toolCalls"]] == ["get_entity_edges"]
    assert run["toolCalls"][0]["input"] == {"entity_id": "ada-lovelace"}
    assert run["usage"]["inputTokens"] > 0
    world.api("bob").call(
        "GET /api/agent-runs/{run_id}", 404, "agent_run_not_found", run_id=talk.agent.meta["runId"]
    )


@covers(
    "GET /api/projects/{project_id}/usage",
    "200",
    "403 forbidden",
    "404 project_not_found",
    "404 agent_definition_not_found",
    "400 invalid_request",
)
def test_a_projects_usage_is_for_its_owners(world: World, talk: Talk) -> None:
    usage = "GET /api/projects/{project_id}/usage"

    figures = world.api("ada").call(usage, 200, project_id=world.project_id).json()

    assert figures["totals"]["turns"] >= 2 and figures["totals"]["runs"] >= 1
    first, last = date.fromisoformat(figures["from"]), date.fromisoformat(figures["to"])
    assert [d["date"] for d in figures["days"]] == [
        str(first + timedelta(days=n)) for n in range((last - first).days + 1)
    ]
    refused = world.api("bob").call(usage, 403, "forbidden", project_id=world.project_id).json()
    assert refused["requiredRole"] == "owner"
    world.api("dan").call(usage, 404, "project_not_found", project_id=world.project_id)
    world.api("ada").call(
        usage,
        404,
        "agent_definition_not_found",
        params={"agentDefinitionId": str(uuid.uuid4())},
        project_id=world.project_id,
    )
    world.api("ada").call(
        usage,
        400,
        "invalid_request",
        params={"from": "2026-05-02", "to": "2026-05-01"},
        project_id=world.project_id,
    )

"""The OpenAI-compatible endpoint ``/v1`` (docs/protocol.md §8) through the official ``openai``
package, as Open WebUI's and LibreChat's backends call it, with API tokens made by
``manage.py create_api_token``: the models a token may see, an agent's answer streamed and not,
a follow-up in the same conversation (seen in kgchat's REST too), an approval answered in the
thread, and errors in OpenAI's shape."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai import OpenAI

from tests.blackbox.covers import covers
from tests.blackbox.server import Kgchat
from tests.blackbox.world import GRAPH, World

THREAD = "X-Kgchat-Conversation"


@pytest.fixture(scope="module")
def token(kgchat: Kgchat, world: World) -> str:
    """ada's token for Atlas."""
    return kgchat.manage("create_api_token", "ada", "--project", "atlas", "--name", "v1").strip()


def client(world: World, token: str) -> OpenAI:
    return OpenAI(base_url=f"{world.url}/v1", api_key=token, max_retries=0, timeout=120)


def edges_of(world: World, key: str) -> str:
    return f"#tool get_entity_edges {json.dumps({'entity_id': key})}\nWho did {key} work with?"


@covers("V1 GET /v1/models", "200", "only the token's projects")
def test_models_list_the_agents_and_plain_chat_of_the_tokens_projects_only(
    kgchat: Kgchat, world: World, token: str
) -> None:
    ada = world.api("ada")
    ada.call("POST /api/projects", 201, json={"name": "Attic", "slug": "attic"})
    unbound = kgchat.manage("create_api_token", "ada", "--name", "v1-all").strip()

    bound_ids = [m.id for m in client(world, token).models.list()]
    all_ids = {m.id for m in client(world, unbound).models.list()}

    assert {f"atlas/{name}" for name in world.agents} | {"atlas/plain"} == set(bound_ids)
    assert {"attic/plain", "atlas/plain"} <= all_ids
    assert not any(i.startswith("demo/") for i in all_ids)  # the admin's demo project: not ada's
    assert client(world, token).models.retrieve("atlas/plain").id == "atlas/plain"


@covers("V1 POST /v1/chat/completions", "200", "cited", "reasoning", "usage")
def test_an_agent_answer_as_one_completion_with_a_citation_link_tool_reasoning_and_usage(
    world: World, token: str
) -> None:
    raw = client(world, token).chat.completions.with_raw_response.create(
        model="atlas/graph-query-agent",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": edges_of(world, "ada-lovelace")},
        ],
    )
    answer = raw.parse()

    conversation = raw.headers[THREAD]
    message = answer.choices[0].message
    ada = world.entities["ada-lovelace"]
    link = f"{world.url}/chat/{conversation}/#entity-{ada}"
    assert answer.object == "chat.completion" and answer.model == "atlas/graph-query-agent"
    assert message.content.startswith(f"Found [Ada Lovelace]({link}).")
    assert "Sources:" not in message.content  # its one citation is linked in the text
    assert message.model_extra["reasoning_content"].startswith("Calling `get_entity_edges`")
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None and answer.usage.completion_tokens > 0
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens


@covers("V1 POST /v1/chat/completions", "200 stream", "follow-up")
def test_a_streamed_answer_and_a_follow_up_in_the_same_conversation(world: World, token: str) -> None:
    openai_client = client(world, token)
    question = {"role": "user", "content": edges_of(world, "charles-babbage")}

    stream = openai_client.chat.completions.create(
        model="atlas/graph-query-agent",
        messages=[question],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    first = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    raw = openai_client.chat.completions.with_raw_response.create(
        model="atlas/graph-query-agent",
        messages=[question, {"role": "assistant", "content": first}, {"role": "user", "content": "Thanks!"}],
        stream=True,
    )
    second = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)

    reasoning = "".join(
        c.choices[0].delta.model_extra.get("reasoning_content") or "" for c in chunks if c.choices
    )
    assert first.startswith("Found [Charles Babbage](") and "get_entity_edges" in reasoning
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert second == "Here is the answer."
    conversation = raw.headers[THREAD]
    stored = (
        world.api("ada")
        .call("GET /api/chat/conversations/{conversation_id}", 200, conversation_id=conversation)
        .json()
    )
    user_messages = [m["content"] for m in stored["messages"] if m["role"] == "user"]
    assert user_messages == [question["content"], "Thanks!"]
    assert stored["agentDefinitionId"] == world.agents["graph-query-agent"]


@covers("V1 POST /v1/chat/completions", "200", "usage")
def test_a_plain_chat_answers_with_the_usage_its_model_reported_the_same_as_kgchats_rest(
    kgchat: Kgchat, world: World
) -> None:
    # bob's turn, not ada's: ada's other turns of this suite come near the 30 a minute a user may send.
    token = kgchat.manage("create_api_token", "bob", "--project", "atlas", "--name", "v1-plain").strip()
    raw = client(world, token).chat.completions.with_raw_response.create(
        model="atlas/plain", messages=[{"role": "user", "content": "Who wrote the first program?"}]
    )
    answer = raw.parse()

    stored = (
        world.api("bob")
        .call("GET /api/chat/conversations/{conversation_id}", 200, conversation_id=raw.headers[THREAD])
        .json()
    )
    assert answer.usage is not None and answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > 0
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens
    reported = {"inputTokens": answer.usage.prompt_tokens, "outputTokens": answer.usage.completion_tokens}
    assert {k: stored["usage"][k] for k in reported} == reported
    assert {k: stored["messages"][-1]["usage"][k] for k in reported} == reported


@covers("V1 POST /v1/chat/completions", "401 invalid_api_key", "404 model_not_found", "400 invalid_request")
def test_errors_come_in_openais_shape(world: World, token: str) -> None:
    with pytest.raises(openai.AuthenticationError) as bad_key:
        client(world, "kgc_not-a-token").models.list()
    with pytest.raises(openai.NotFoundError) as unknown:
        client(world, token).chat.completions.create(
            model="attic/plain", messages=[{"role": "user", "content": "Hi"}]
        )
    with pytest.raises(openai.BadRequestError) as bad_body:
        client(world, token).chat.completions.create(model="atlas/plain", messages=[])

    assert (bad_key.value.status_code, bad_key.value.code) == (401, "invalid_api_key")
    assert (unknown.value.status_code, unknown.value.code) == (404, "model_not_found")
    assert (bad_body.value.status_code, bad_body.value.param) == (400, "messages")
    body: Any = bad_body.value.body
    assert set(body) == {"message", "type", "param", "code"} and body["type"] == "invalid_request_error"


@covers("V1 POST /v1/chat/completions", "approve")
def test_an_approval_the_agent_asks_for_is_answered_approve_in_the_thread(
    kgchat: Kgchat, world: World
) -> None:
    ada = world.api("ada")
    project = ada.call("POST /api/projects", 201, json={"name": "Relay", "slug": "relay"}).json()["id"]
    ada.call(
        "POST /api/projects/{project_id}/members",
        201,
        json={"username": "bob", "role": "editor"},
        project_id=project,
    )
    ada.call("POST /api/projects/{project_id}/graph/import", 200, content=GRAPH, project_id=project)
    ada.call("POST /api/admin/projects/{project_id}/install-default-agents", 200, project_id=project)
    bob = client(
        world, kgchat.manage("create_api_token", "bob", "--project", "relay", "--name", "v1").strip()
    )
    proposal = {
        "role": "user",
        "content": "#tool create_entity "
        + json.dumps({"key": "grace-hopper", "type": "Person", "name": "Grace Hopper"})
        + "\nPlease add Grace Hopper.",
    }

    asked = bob.chat.completions.create(model="relay/graph-curator-agent", messages=[proposal])
    waiting = asked.choices[0].message.content
    ada.call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}",
        404,
        "entity_not_found",
        project_id=project,
        id_or_key="grace-hopper",
    )
    approved = bob.chat.completions.create(
        model="relay/graph-curator-agent",
        messages=[
            proposal,
            {"role": "assistant", "content": waiting},
            {"role": "user", "content": "approve"},
        ],
    )

    assert "**Approval needed**" in waiting and "Reply **approve** or **reject**" in waiting
    assert approved.choices[0].message.content.startswith("Found [Grace Hopper](")
    created = ada.call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}",
        200,
        project_id=project,
        id_or_key="grace-hopper",
    ).json()
    assert created["name"] == "Grace Hopper"

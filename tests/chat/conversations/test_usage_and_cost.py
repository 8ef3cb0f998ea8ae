"""Tokens and cost (issue #14 item 5): per answer and per conversation in REST, priced by KGCHAT_MODEL_PRICES."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.agents.definitions import default_agents_install
from apps.agents.llm.base import Usage
from apps.agents.llm.scripted import text
from apps.agents.models import AgentDefinition
from tests.chat.conftest import adb, sse_turn
from tests.factories import make_agent_answer, make_conversation, make_project, make_user

PRICES = {"openai/priced": {"input": 2.0, "output": 8.0}}


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_answers_show_tokens_and_cost_and_the_conversation_their_totals(settings):
    settings.KGCHAT_MODEL_PRICES = PRICES
    user = make_user()
    conversation = make_conversation(user, make_project(owner=user), "Q", [("user", "q1")])
    make_agent_answer(
        conversation, "a1", model="openai/priced", input_tokens=1_000_000, output_tokens=500_000
    )
    make_agent_answer(conversation, "a2", model="openai/priced", input_tokens=250_000, output_tokens=0)

    body = client_for(user).get(f"/api/chat/conversations/{conversation.id}").json()

    first, second = body["messages"][1]["usage"], body["messages"][2]["usage"]
    assert body["messages"][0]["usage"] is None
    assert first == {"inputTokens": 1_000_000, "outputTokens": 500_000, "cost": 6.0}
    assert second == {"inputTokens": 250_000, "outputTokens": 0, "cost": 0.5}
    assert body["usage"] == {"inputTokens": 1_250_000, "outputTokens": 500_000, "cost": 6.5}


@pytest.mark.django_db
def test_a_model_without_a_price_shows_tokens_and_a_null_cost(settings):
    settings.KGCHAT_MODEL_PRICES = PRICES
    user = make_user()
    conversation = make_conversation(user, make_project(owner=user), "Q", [("user", "q1")])
    make_agent_answer(conversation, "a1", model="openai/priced", input_tokens=10, output_tokens=10)
    make_agent_answer(conversation, "a2", model="ollama/unpriced", input_tokens=30, output_tokens=5)

    body = client_for(user).get(f"/api/chat/conversations/{conversation.id}").json()

    assert body["messages"][2]["usage"] == {"inputTokens": 30, "outputTokens": 5, "cost": None}
    assert body["usage"] == {"inputTokens": 40, "outputTokens": 15, "cost": None}


@pytest.mark.django_db
def test_an_answer_without_a_run_shows_no_usage_and_a_conversation_without_runs_totals_zero():
    # A plain answer stored before plain answers recorded their tokens (#50) names no run.
    user = make_user()
    conversation = make_conversation(
        user, make_project(owner=user), "Q", [("user", "q"), ("assistant", "plain")]
    )

    body = client_for(user).get(f"/api/chat/conversations/{conversation.id}").json()

    assert body["messages"][1]["usage"] is None
    assert body["usage"] == {"inputTokens": 0, "outputTokens": 0, "cost": 0.0}


@pytest.mark.django_db(transaction=True)
async def test_the_usage_a_model_reports_in_a_real_agent_turn_reaches_the_answer(world, scripted, settings):
    settings.KGCHAT_MODEL_PRICES = {settings.KGCHAT_MODEL: {"input": 1.0, "output": 1.0}}
    await adb(default_agents_install)(project=world["project"])
    agent = await AgentDefinition.objects.aget(project=world["project"], name="graph-query-agent")
    scripted.turns += [text("Paris.", usage=Usage(input_tokens=120, output_tokens=8))]
    _, frames = await sse_turn(
        world["client"],
        {"message": "Capital?", "projectId": str(world["project"].id), "agentDefinitionId": str(agent.id)},
    )
    client = await adb(client_for)(world["user"])

    body = (await adb(client.get)(f"/api/chat/conversations/{frames[0]['conversationId']}")).json()

    answer = next(m for m in body["messages"] if m["id"] == frames[-1]["messageId"])
    assert answer["usage"]["inputTokens"] == 120 and answer["usage"]["outputTokens"] == 8
    assert answer["usage"]["cost"] == pytest.approx(128 / 1_000_000)
    assert body["usage"]["inputTokens"] == 120


@pytest.mark.django_db(transaction=True)
async def test_a_plain_answer_shows_the_tokens_its_model_reported_and_the_conversation_totals_them(
    world, scripted, settings
):
    settings.KGCHAT_MODEL_PRICES = {settings.KGCHAT_MODEL: {"input": 2.0, "output": 8.0}}
    scripted.turns += [
        text("Paris.", usage=Usage(input_tokens=1000, output_tokens=100)),
        text("France.", usage=Usage(input_tokens=2000, output_tokens=50)),
    ]
    _, first = await sse_turn(world["client"], {"message": "Capital?", "projectId": str(world["project"].id)})
    conversation_id = first[0]["conversationId"]
    _, second = await sse_turn(world["client"], {"message": "Of?", "conversationId": conversation_id})
    client = await adb(client_for)(world["user"])

    body = (await adb(client.get)(f"/api/chat/conversations/{conversation_id}")).json()

    usage = {m["id"]: m["usage"] for m in body["messages"]}
    assert usage[first[-1]["messageId"]] == {"inputTokens": 1000, "outputTokens": 100, "cost": 0.0028}
    assert usage[second[-1]["messageId"]] == {"inputTokens": 2000, "outputTokens": 50, "cost": 0.0044}
    assert body["usage"] == {"inputTokens": 3000, "outputTokens": 150, "cost": 0.0072}

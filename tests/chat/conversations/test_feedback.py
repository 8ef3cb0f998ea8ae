"""Feedback on answers (issue #14 item 3): PUT/DELETE /api/chat/messages/{id}/feedback and the admin list."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.agents.definitions import default_agents_install
from apps.agents.llm.base import Usage
from apps.agents.llm.scripted import text
from apps.agents.models import AgentDefinition
from apps.chat.models import Message, MessageFeedback
from tests.chat.conftest import adb, sse_turn
from tests.factories import add_member, make_agent_answer, make_conversation, make_project, make_user


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def put_feedback(client: Client, message_id, **body):
    return client.put(f"/api/chat/messages/{message_id}/feedback", body, content_type="application/json")


@pytest.fixture
def answered(db):
    user = make_user()
    project = make_project(owner=user)
    conversation = make_conversation(user, project, "Q", [("user", "question?")])
    answer = make_agent_answer(conversation, "The answer.", model="openai/gpt-test")
    return {"user": user, "project": project, "conversation": conversation, "answer": answer}


@pytest.mark.django_db
def test_thumbs_down_with_a_comment_is_stored_with_the_run_and_shown_as_mine(answered):
    client = client_for(answered["user"])
    answer = answered["answer"]

    response = put_feedback(client, answer.id, rating="down", comment="Wrong city")

    body = response.json()
    stored = MessageFeedback.objects.get(message=answer)
    assert response.status_code == 200
    assert body["rating"] == "down" and body["comment"] == "Wrong city"
    assert body["runId"] == answer.retrieval_context["agent_run_id"]
    assert str(stored.agent_run_id) == answer.retrieval_context["agent_run_id"]
    messages = client.get(f"/api/chat/conversations/{answered['conversation'].id}").json()["messages"]
    assert messages[0]["feedback"] is None
    assert messages[1]["feedback"]["rating"] == "down" and messages[1]["feedback"]["comment"] == "Wrong city"


@pytest.mark.django_db
def test_feedback_is_one_per_user_per_answer_replaced_then_cleared(answered):
    client = client_for(answered["user"])
    answer = answered["answer"]

    put_feedback(client, answer.id, rating="down", comment="meh")
    put_feedback(client, answer.id, rating="up")
    cleared = client.delete(f"/api/chat/messages/{answer.id}/feedback")
    cleared_again = client.delete(f"/api/chat/messages/{answer.id}/feedback")

    assert cleared.status_code == 204 and cleared_again.status_code == 204
    assert MessageFeedback.objects.filter(message=answer).count() == 0


@pytest.mark.django_db
def test_replacing_feedback_keeps_one_row(answered):
    client = client_for(answered["user"])
    answer = answered["answer"]

    put_feedback(client, answer.id, rating="down", comment="meh")
    second = put_feedback(client, answer.id, rating="up")

    assert second.json()["rating"] == "up" and second.json()["comment"] == ""
    assert list(MessageFeedback.objects.filter(message=answer).values_list("rating", flat=True)) == ["up"]


@pytest.mark.django_db
def test_feedback_on_a_user_message_is_400_not_an_answer(answered):
    question = Message.objects.get(conversation=answered["conversation"], role="user")

    response = put_feedback(client_for(answered["user"]), question.id, rating="up")

    assert response.status_code == 400 and response.json()["code"] == "not_an_answer"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        {"rating": "meh"},
        {},
        {"rating": "up", "comment": "x" * 10_001},
        {"rating": "up", "comment": "a\u0000b"},
    ],
)
def test_bad_feedback_is_400_and_stores_nothing(answered, body):
    response = put_feedback(client_for(answered["user"]), answered["answer"].id, **body)

    assert response.status_code == 400 and response.json()["code"] == "invalid_request"
    assert not MessageFeedback.objects.exists()


@pytest.mark.django_db
def test_feedback_on_another_users_answer_or_an_unknown_id_is_404(answered):
    member = make_user()
    add_member(answered["project"], member, "editor")

    other = put_feedback(client_for(member), answered["answer"].id, rating="up")
    unknown = put_feedback(client_for(member), "not-a-uuid", rating="up")

    assert other.status_code == 404 and other.json()["code"] == "message_not_found"
    assert unknown.status_code == 404


@pytest.mark.django_db
def test_a_member_seeing_a_shared_conversation_may_rate_its_answers(answered):
    member = make_user()
    add_member(answered["project"], member, "viewer")
    token = (
        client_for(answered["user"])
        .post(
            f"/api/chat/conversations/{answered['conversation'].id}/shares",
            {},
            content_type="application/json",
        )
        .json()["token"]
    )

    response = put_feedback(client_for(member), answered["answer"].id, rating="up")

    assert response.status_code == 200
    assert MessageFeedback.objects.get().user == member
    shown = client_for(member).get(f"/api/shares/{token}").json()["messages"]
    assert [m["feedback"]["rating"] if m["feedback"] else None for m in shown] == [None, "up"]


@pytest.mark.django_db
def test_admin_lists_feedback_filtered_by_rating_and_model_with_a_link_to_the_run(answered, admin_client):
    put_feedback(client_for(answered["user"]), answered["answer"].id, rating="down", comment="Wrong city")
    run_id = answered["answer"].retrieval_context["agent_run_id"]

    down = admin_client.get(
        "/admin/chat/messagefeedback/?rating=down&agent_run__model=openai/gpt-test"
    ).content.decode()
    up = admin_client.get("/admin/chat/messagefeedback/?rating=up").content.decode()

    assert "Wrong city" in down and "openai/gpt-test" in down
    assert f"/admin/agents/agentrun/{run_id}/change/" in down
    assert "Wrong city" not in up


@pytest.mark.django_db(transaction=True)
async def test_feedback_on_a_real_agent_turn_keeps_its_run_and_the_admin_filters_by_definition(
    world, scripted
):
    await adb(default_agents_install)(project=world["project"])
    agent = await AgentDefinition.objects.aget(project=world["project"], name="graph-query-agent")
    scripted.turns += [text("Paris.", usage=Usage(input_tokens=120, output_tokens=8))]
    _, frames = await sse_turn(
        world["client"],
        {"message": "Capital?", "projectId": str(world["project"].id), "agentDefinitionId": str(agent.id)},
    )
    done = frames[-1]
    client = await adb(client_for)(world["user"])

    response = await adb(put_feedback)(client, done["messageId"], rating="down", comment="too short")

    assert response.status_code == 200 and response.json()["runId"] == done["runId"]
    feedback = await MessageFeedback.objects.select_related("agent_run").aget()
    assert feedback.agent_run is not None and feedback.agent_run.agent_definition_id == agent.id

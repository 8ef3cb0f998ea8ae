"""Export and share links (issue #14 item 3): Markdown/JSON export, share links, the read-only share page."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from apps.chat.conversations.sharing import ShareNotFound, shared_conversation_get
from apps.chat.models import ConversationShare, Message
from apps.projects.selectors import Principal, token_hash
from apps.projects.services import member_remove
from tests.factories import (
    add_member,
    make_agent_answer,
    make_conversation,
    make_entity,
    make_project,
    make_user,
)

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def shared_world():
    owner, colleague, outsider = make_user(), make_user(), make_user()
    project = make_project(owner=owner, name="Atlas")
    add_member(project, colleague, "viewer")
    paris = make_entity(project, "paris", type="City", name="Paris")
    conversation = make_conversation(owner, project, "Capitals", [("user", "What is the capital of France?")])
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="",
        tool_calls=[{"id": "c1", "name": "search_entities", "input": {"query": "France"}}],
    )
    Message.objects.create(
        conversation=conversation,
        role="tool",
        content="",
        tool_calls=[{"id": "c1", "name": "search_entities", "output": {"items": [{"key": "paris"}]}}],
    )
    answer = make_agent_answer(
        conversation,
        f"It is [the city](entity:{paris.id}). <img src=x onerror=alert(1)> [bad](javascript:alert(1)) ![pixel](https://tracker.example/p.png)",
        citations=[{"id": str(paris.id), "key": "paris", "type": "City", "name": "Paris"}],
    )
    return {
        "owner": owner,
        "colleague": colleague,
        "outsider": outsider,
        "project": project,
        "conversation": conversation,
        "answer": answer,
    }


def make_share(world, **body) -> dict:
    response = client_for(world["owner"]).post(
        f"/api/chat/conversations/{world['conversation'].id}/shares", body, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def test_export_markdown_resolves_entity_links_to_names_and_folds_tool_calls(shared_world):
    conversation = shared_world["conversation"]

    response = client_for(shared_world["owner"]).get(
        f"/api/chat/conversations/{conversation.id}/export?format=markdown"
    )

    body = response.content.decode()
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/markdown")
    assert f'filename="conversation-{conversation.id}.md"' in response["Content-Disposition"]
    assert body.startswith("# Capitals")
    assert "It is Paris." in body and "entity:" not in body
    assert "<details>\n<summary>Tool call: search_entities</summary>" in body
    assert '"query": "France"' in body and '"key": "paris"' in body


def test_export_json_has_the_stored_messages_tool_calls_and_run_ids(shared_world):
    conversation, answer = shared_world["conversation"], shared_world["answer"]

    response = client_for(shared_world["owner"]).get(
        f"/api/chat/conversations/{conversation.id}/export?format=json"
    )

    document = json.loads(response.content)
    run_id = answer.retrieval_context["agent_run_id"]
    assert document["conversation"]["id"] == str(conversation.id)
    assert [m["role"] for m in document["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert document["messages"][1]["toolCalls"][0]["name"] == "search_entities"
    assert document["messages"][3]["runId"] == run_id
    assert document["runIds"] == [run_id]
    # Times as the REST schemas write them: to the millisecond, UTC as Z.
    times = [
        document["exportedAt"],
        document["conversation"]["createdAt"],
        document["messages"][0]["createdAt"],
    ]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", t) for t in times), times


def test_export_of_an_unknown_format_is_400_and_of_another_users_conversation_404(shared_world):
    conversation = shared_world["conversation"]

    bad_format = client_for(shared_world["owner"]).get(
        f"/api/chat/conversations/{conversation.id}/export?format=pdf"
    )
    not_mine = client_for(shared_world["colleague"]).get(f"/api/chat/conversations/{conversation.id}/export")

    assert bad_format.status_code == 400 and bad_format.json()["code"] == "invalid_request"
    assert not_mine.status_code == 404 and not_mine.json()["code"] == "conversation_not_found"


def test_share_link_token_is_random_shown_once_and_only_its_hash_is_stored(shared_world):
    created = make_share(shared_world, expiresInHours=24)

    stored = ConversationShare.objects.get(id=created["id"])
    assert len(created["token"]) >= 43  # 32 random bytes, URL-safe base64
    assert created["url"].endswith(f"/share/{created['token']}")
    assert stored.token_hash == token_hash(created["token"]) and created["token"] not in stored.token_hash
    assert created["status"] == "active" and created["expiresAt"] is not None
    listed = client_for(shared_world["owner"]).get(
        f"/api/chat/conversations/{shared_world['conversation'].id}/shares"
    )
    assert [s["id"] for s in listed.json()["items"]] == [created["id"]]
    assert "token" not in listed.json()["items"][0]


def test_share_page_opens_read_only_for_another_member_with_safe_markdown(shared_world):
    created = make_share(shared_world)

    page = client_for(shared_world["colleague"]).get(f"/share/{created['token']}")

    html = page.content.decode()
    assert page.status_code == 200
    assert "What is the capital of France?" in html and "Paris" in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert 'href="javascript:' not in html
    assert 'src="https://tracker.example' not in html
    assert "<textarea" not in html and "<script" not in html and "<form" not in html
    assert "Tool call: search_entities" in html


def test_share_page_and_json_are_404_for_a_non_member(shared_world):
    created = make_share(shared_world)
    outsider = client_for(shared_world["outsider"])

    page = outsider.get(f"/share/{created['token']}")
    api = outsider.get(f"/api/shares/{created['token']}")

    assert page.status_code == 404 and "Capitals" not in page.content.decode()
    assert api.status_code == 404 and api.json()["code"] == "share_not_found"


def test_share_page_sends_a_logged_out_visitor_to_login_and_back():
    response = Client().get("/share/some-token")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/share/some-token")


def test_shared_conversation_json_for_a_member(shared_world):
    created = make_share(shared_world)

    body = client_for(shared_world["colleague"]).get(f"/api/shares/{created['token']}").json()

    assert body["id"] == str(shared_world["conversation"].id)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "assistant"]


def test_revoked_expired_or_wrong_share_tokens_are_404(shared_world):
    revoked = make_share(shared_world)
    expired = make_share(shared_world, expiresInHours=1)
    owner = client_for(shared_world["owner"])
    deleted = owner.delete(
        f"/api/chat/conversations/{shared_world['conversation'].id}/shares/{revoked['id']}"
    )
    colleague = client_for(shared_world["colleague"])
    later = timezone.now() + timedelta(hours=2)

    assert deleted.status_code == 204
    assert colleague.get(f"/share/{revoked['token']}").status_code == 404
    assert colleague.get(f"/share/{'x' * 43}").status_code == 404
    assert colleague.get("/api/shares/%00").status_code in (400, 404)
    with pytest.raises(ShareNotFound):
        shared_conversation_get(
            principal=Principal(user=shared_world["colleague"]), token=expired["token"], now=later
        )


def test_share_stops_working_for_a_viewer_who_left_the_project(shared_world):
    created = make_share(shared_world)
    colleague = shared_world["colleague"]
    project = shared_world["project"]
    member_remove(principal=Principal(user=colleague), project_ref=str(project.id), user_id=colleague.pk)

    assert client_for(colleague).get(f"/share/{created['token']}").status_code == 404


def test_share_stops_working_when_the_conversations_owner_left_the_project(shared_world):
    created = make_share(shared_world)
    owner, colleague, project = shared_world["owner"], shared_world["colleague"], shared_world["project"]
    add_member(project, colleague, "owner")
    before = client_for(colleague).get(f"/share/{created['token']}").status_code

    member_remove(principal=Principal(user=owner), project_ref=str(project.id), user_id=owner.pk)

    assert before == 200
    assert client_for(colleague).get(f"/share/{created['token']}").status_code == 404


def test_only_the_conversations_owner_manages_its_shares(shared_world):
    created = make_share(shared_world)
    conversation = shared_world["conversation"]
    colleague = client_for(shared_world["colleague"])

    create = colleague.post(
        f"/api/chat/conversations/{conversation.id}/shares", {}, content_type="application/json"
    )
    revoke = colleague.delete(f"/api/chat/conversations/{conversation.id}/shares/{created['id']}")
    bad_hours = client_for(shared_world["owner"]).post(
        f"/api/chat/conversations/{conversation.id}/shares",
        {"expiresInHours": 0},
        content_type="application/json",
    )

    assert create.status_code == 404 and revoke.status_code == 404
    assert bad_hours.status_code == 400 and bad_hours.json()["code"] == "invalid_request"

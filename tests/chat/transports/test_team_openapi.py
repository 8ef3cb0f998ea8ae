"""The routes and fields of issue #14 items 2–5 are in the OpenAPI document (/api/openapi.json)."""

import pytest
from django.test import Client

from tests.factories import make_user


@pytest.mark.django_db
def test_openapi_lists_search_export_shares_feedback_and_usage():
    client = Client()
    client.force_login(make_user())

    schema = client.get("/api/openapi.json").json()

    paths = schema["paths"]
    params = {p["name"] for p in paths["/api/chat/conversations"]["get"]["parameters"]}
    assert "q" in params
    assert "get" in paths["/api/chat/conversations/{conversation_id}/export"]
    assert {"get", "post"} <= set(paths["/api/chat/conversations/{conversation_id}/shares"])
    assert "delete" in paths["/api/chat/conversations/{conversation_id}/shares/{share_id}"]
    assert "get" in paths["/api/shares/{token}"]
    assert {"put", "delete"} <= set(paths["/api/chat/messages/{message_id}/feedback"])
    schemas = schema["components"]["schemas"]
    assert {"feedback", "usage"} <= set(schemas["MessageOut"]["properties"])
    assert "usage" in schemas["ConversationWithMessagesOut"]["properties"]
    assert "snippet" in schemas["ConversationHitOut"]["properties"]

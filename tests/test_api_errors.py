"""Every error under /api is JSON with a reason and a code (never an HTML page or a traceback)."""

import pytest
from django.test import Client

from tests.factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def client():
    c = Client()
    c.force_login(make_user())
    return c


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("get", "/api/no-such-route", None, 404, "not_found"),
        ("delete", "/api/projects", None, 405, "method_not_allowed"),
        ("post", "/api/projects", "not json", 400, "invalid_request"),
        ("post", "/api/projects", '{"name": 5}', 400, "invalid_request"),
        ("post", "/api/projects", '{"name": "   "}', 400, "invalid_request"),
        ("get", "/api/projects?limit=abc", None, 400, "invalid_request"),
        ("get", "/api/projects/not-mine", None, 404, "project_not_found"),
        ("post", "/api/chat/stream", '{"message": "x"}', 400, "invalid_request"),
        ("post", "/api/chat/stream", "[1, 2]", 400, "invalid_request"),
        ("get", "/api/chat/conversations/abc", None, 404, "conversation_not_found"),
        ("get", "/api/agent-runs/abc", None, 404, "agent_run_not_found"),
        ("get", "/api/agent-definitions/abc", None, 404, "agent_definition_not_found"),
    ],
)
def test_bad_requests_get_a_json_reason_and_code(client, method, path, body, status, code):
    if body is None:
        response = getattr(client, method)(path)
    else:
        response = getattr(client, method)(path, body, content_type="application/json")

    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    payload = response.json()
    assert payload["code"] == code
    assert isinstance(payload["error"], str) and payload["error"]

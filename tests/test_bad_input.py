"""Issue #11 (red team, bad input) over REST: every finding answers a 4xx JSON with a code, never a 500.

The findings: NUL characters and unpaired surrogates (PostgreSQL cannot store them), JSON nested
10,000 deep (Python's parser gives up), integers beyond bigint (``offset=10**20``), over-long
strings and slugs that could never be addressed. The sweep at the end throws all of them at every
REST endpoint of PROTOCOL §2 that takes input, as the guard against regressions.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from apps.agents.models import AgentDefinition
from apps.chat.models import Conversation
from apps.graph_tools.models import GraphObject
from apps.projects.models import Project
from tests.factories import make_agent_definition, make_entity, make_project, make_user

pytestmark = pytest.mark.django_db

DEEP_JSON = "[" * 10_000 + "]" * 10_000
NUL = "\x00"
SURROGATE = "\ud800"
HUGE = 10**20
LONG = "x" * 1_000_001


class World:
    def __init__(self) -> None:
        self.user = make_user()
        self.project = make_project(owner=self.user, name="Bad input")
        self.entity = make_entity(self.project, "alice", type="Person", name="Alice")
        self.definition = make_agent_definition(self.project, name="agent")
        self.conversation = Conversation.objects.create(project=self.project, user=self.user, title="t")
        self.client = Client()
        self.client.force_login(self.user)


@pytest.fixture
def world() -> World:
    return World()


def send(client: Client, method: str, path: str, body: str | None = None) -> Any:
    if body is None:
        return getattr(client, method)(path)
    return getattr(client, method)(path, body, content_type="application/json")


def assert_json_4xx(response: Any, code: str | None = None) -> dict[str, Any]:
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    payload = response.json()
    assert isinstance(payload["error"], str) and payload["error"]
    assert isinstance(payload["code"], str) and payload["code"] != "internal_error"
    if code is not None:
        assert payload["code"] == code, payload
    return payload


# --- finding 1: NUL and unpaired surrogates --------------------------------------------------


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
@pytest.mark.parametrize(
    ("method", "path", "field"),
    [
        ("post", "/api/projects", "name"),
        ("post", "/api/projects", "slug"),
        ("post", "/api/projects/{project}/agent-definitions", "name"),
        ("post", "/api/projects/{project}/agent-definitions", "systemPrompt"),
        ("patch", "/api/agent-definitions/{definition}", "systemPrompt"),
        ("patch", "/api/chat/conversations/{conversation}", "title"),
        ("post", "/api/chat/stream", "projectId"),
    ],
)
def test_nul_bytes_and_lone_surrogates_are_rejected_not_500(world, bad, method, path, field):
    body = {
        "name": "n",
        "message": "hello",
        "projectId": str(world.project.id),
        "title": "t",
        field: f"a{bad}b",
    }
    url = path.format(
        project=world.project.id, definition=world.definition.id, conversation=world.conversation.id
    )

    response = send(world.client, method, url, json.dumps(body))

    error = assert_json_4xx(response)
    assert response.status_code == 400
    assert error["code"] in ("invalid_request", "invalid_agent_definition")
    assert field in error["error"]
    assert Project.objects.count() == 1
    assert AgentDefinition.objects.get().system_prompt == ""
    assert Conversation.objects.get().title == "t"


@pytest.mark.parametrize(
    "path",
    [
        "/api/projects/%00",
        "/api/projects/%00/graph/entities",
        "/api/projects/{project}/graph/entities/%00",
        "/api/agent-definitions/%00",
        "/api/chat/conversations/%00",
        "/api/agent-runs/%00",
        "/api/projects/{project}/graph/entities?q=%00",
        "/api/projects/{project}/graph/entities?type=a%00",
        "/api/chat/conversations?projectId=%00",
    ],
)
def test_nul_in_a_path_or_query_parameter_is_rejected_not_500(world, path):
    response = world.client.get(path.format(project=world.project.id))

    error = assert_json_4xx(response, "invalid_request")
    assert response.status_code == 400
    assert "NUL" in error["error"]


@pytest.mark.parametrize(
    ("arguments", "argument"),
    [
        ({"query": f"Alice{NUL}"}, "query"),
        ({"query": f"Alice{SURROGATE}"}, "query"),
        ({"query": "Alice", "types": ["Person", NUL]}, "types.1"),
    ],
    ids=["nul", "surrogate", "nul-in-list"],
)
def test_tool_arguments_with_nul_or_surrogates_are_invalid_arguments_not_500(world, arguments, argument):
    url = f"/api/projects/{world.project.id}/graph/tools/hybrid_search"

    response = send(world.client, "post", url, json.dumps(arguments))

    error = assert_json_4xx(response, "invalid_arguments")
    assert error["argument"] == argument


# --- finding 2: deep nesting ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "code"),
    [
        ("post", "/api/projects/{project}/graph/tools/query_entities", "invalid_arguments"),
        ("post", "/api/projects", "invalid_request"),
        ("post", "/api/projects/{project}/agent-definitions", "invalid_request"),
        ("post", "/api/chat/stream", "invalid_request"),
    ],
)
def test_body_nested_10000_deep_is_a_400_not_500(world, method, path, code):
    body = '{"properties": {"a": ' + DEEP_JSON + "}}"

    response = send(world.client, method, path.format(project=world.project.id), body)

    error = assert_json_4xx(response, code)
    assert "nested" in error["error"]


def test_tool_arguments_nested_deeper_than_the_limit_name_the_argument(world):
    nested: Any = "x"
    for _ in range(100):
        nested = {"a": nested}
    url = f"/api/projects/{world.project.id}/graph/tools/query_entities"

    response = send(world.client, "post", url, json.dumps({"properties": nested}))

    error = assert_json_4xx(response, "invalid_arguments")
    assert error["argument"].startswith("properties.a")


# --- finding 3: numbers beyond bigint, slugs ----------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/projects/{project}/graph/entities?offset=100000000000000000000",
        "/api/projects/{project}/graph/entities?limit=100000000000000000000",
        "/api/chat/conversations?offset=100000000000000000000",
        "/api/chat/conversations?limit=-100000000000000000000",
        "/api/projects?offset=100000000000000000000",
    ],
)
def test_offset_or_limit_beyond_bigint_is_a_400_not_500(world, path):
    response = world.client.get(path.format(project=world.project.id))

    error = assert_json_4xx(response, "invalid_request")
    assert "offset" in error["error"] or "limit" in error["error"]


def test_paging_within_range_still_works_and_an_offset_past_the_end_is_an_empty_page(world):
    response = world.client.get(f"/api/projects/{world.project.id}/graph/entities?offset=1000000&limit=1000")

    assert response.status_code == 200
    assert response.json() == {"items": [], "count": 1}


@pytest.mark.parametrize("offset", [HUGE, -1])
def test_tool_offset_beyond_its_bound_is_invalid_arguments(world, offset):
    url = f"/api/projects/{world.project.id}/graph/tools/query_entities"

    response = send(world.client, "post", url, json.dumps({"offset": offset}))

    error = assert_json_4xx(response, "invalid_arguments")
    assert error["argument"] == "offset"


@pytest.mark.parametrize(
    "slug",
    ["s" * 101, "has space", "a/b", "ünïcode", "..", "3f1c2a9e-4b8d-4c6e-9a7f-0d2b1e5c6a70"],
    ids=["101-chars", "space", "slash", "non-ascii", "dots", "uuid"],
)
def test_project_slug_too_long_or_unaddressable_is_rejected_not_stored(world, slug):
    response = send(world.client, "post", "/api/projects", json.dumps({"name": "P", "slug": slug}))

    error = assert_json_4xx(response, "invalid_request")
    assert error["field"] == "slug"
    assert Project.objects.count() == 1


def test_a_project_created_with_a_valid_slug_is_addressable_by_it(world):
    created = send(world.client, "post", "/api/projects", json.dumps({"name": "P", "slug": "My_proj-2"}))

    response = world.client.get("/api/projects/My_proj-2")

    assert created.status_code == 201
    assert response.status_code == 200
    assert response.json()["id"] == created.json()["id"]


def test_project_name_over_200_characters_is_rejected_not_truncated(world):
    response = send(world.client, "post", "/api/projects", json.dumps({"name": "n" * 201}))

    error = assert_json_4xx(response, "invalid_request")
    assert error["field"] == "name"
    assert Project.objects.count() == 1


# --- the sweep ----------------------------------------------------------------------------------

BAD_VALUES = {
    "nul": NUL,
    "surrogate": f"x{SURROGATE}",
    "deep": json.loads("[" * 500 + "]" * 500),
    "huge": HUGE,
    "long": LONG,
}

# (method, path, body with the field to spoil set to None); {project} etc. are filled in.
BODY_ENDPOINTS = [
    ("post", "/api/projects", {"name": None}),
    ("post", "/api/projects", {"name": "P", "slug": None}),
    ("post", "/api/projects/{project}/agent-definitions", {"name": None}),
    ("post", "/api/projects/{project}/agent-definitions", {"name": "a2", "systemPrompt": None}),
    ("post", "/api/projects/{project}/agent-definitions", {"name": "a2", "description": None}),
    ("patch", "/api/agent-definitions/{definition}", {"name": None}),
    ("patch", "/api/agent-definitions/{definition}", {"systemPrompt": None}),
    ("patch", "/api/chat/conversations/{conversation}", {"title": None}),
    ("post", "/api/chat/stream", {"message": None, "projectId": "{project}"}),
    ("post", "/api/chat/stream", {"message": "hi", "projectId": None}),
    ("post", "/api/chat/stream", {"message": "hi", "conversationId": None}),
    ("post", "/api/projects/{project}/graph/tools/hybrid_search", {"query": None}),
    ("post", "/api/projects/{project}/graph/tools/query_entities", {"offset": None}),
    ("post", "/api/projects/{project}/graph/tools/query_entities", {"limit": None}),
    ("post", "/api/projects/{project}/graph/tools/get_entity_edges", {"entity_id": None}),
    ("post", "/api/projects/{project}/graph/tools/traverse_graph", {"start_entity_id": None}),
]

QUERY_ENDPOINTS = [
    ("/api/projects", "limit"),
    ("/api/projects", "offset"),
    ("/api/projects/{project}/graph/entities", "q"),
    ("/api/projects/{project}/graph/entities", "type"),
    ("/api/projects/{project}/graph/entities", "limit"),
    ("/api/projects/{project}/graph/entities", "offset"),
    ("/api/chat/conversations", "projectId"),
    ("/api/chat/conversations", "limit"),
    ("/api/chat/conversations", "offset"),
]

# URL forms of the bad values (a path or query cannot carry a lone surrogate as text: its UTF-8
# encoding is invalid bytes, sent percent-encoded).
URL_VALUES = {
    "nul": "a%00",
    "surrogate": "%ED%A0%80",
    "huge": str(HUGE),
    "long": "x" * 20_000,
}

PATH_ENDPOINTS = [
    "/api/projects/{bad}",
    "/api/projects/{bad}/graph/entities",
    "/api/projects/{project}/graph/entities/{bad}",
    "/api/projects/{project}/graph/tools/{bad}",
    "/api/agent-definitions/{bad}",
    "/api/chat/conversations/{bad}",
    "/api/agent-runs/{bad}",
]


def _fill(world: World, template: str) -> str:
    return template.format(
        project=world.project.id,
        definition=world.definition.id,
        conversation=world.conversation.id,
        bad="{bad}",
    )


@pytest.mark.parametrize("bad", list(BAD_VALUES), ids=list(BAD_VALUES))
@pytest.mark.parametrize(
    ("method", "path", "body"),
    BODY_ENDPOINTS,
    ids=[f"{m} {p} {next(k for k, v in b.items() if v is None)}" for m, p, b in BODY_ENDPOINTS],
)
def test_sweep_bad_values_in_bodies_get_a_4xx_json_with_a_code(world, method, path, body, bad):
    filled = {k: (BAD_VALUES[bad] if v is None else _fill(world, v)) for k, v in body.items()}
    before = (Project.objects.count(), AgentDefinition.objects.count(), Conversation.objects.count())

    response = send(world.client, method, _fill(world, path), json.dumps(filled))

    assert_json_4xx(response)
    assert (Project.objects.count(), AgentDefinition.objects.count(), Conversation.objects.count()) == before
    assert Conversation.objects.get().title == "t"
    assert AgentDefinition.objects.get().name == "agent"


@pytest.mark.parametrize("bad", list(URL_VALUES), ids=list(URL_VALUES))
@pytest.mark.parametrize(("path", "param"), QUERY_ENDPOINTS, ids=[f"{p} {q}" for p, q in QUERY_ENDPOINTS])
def test_sweep_bad_values_in_query_parameters_get_a_4xx_or_an_honest_empty_answer(world, path, param, bad):
    response = world.client.get(f"{_fill(world, path)}?{param}={URL_VALUES[bad]}")

    if param in ("limit", "offset") or bad in ("nul",) or (bad == "long" and param in ("q", "type")):
        assert_json_4xx(response)
    else:  # a search or filter for text no row has: a 200 with what matches (nothing), never a 500
        assert response.status_code in (200, 400), response.content[:300]


@pytest.mark.parametrize("bad", list(URL_VALUES), ids=list(URL_VALUES))
@pytest.mark.parametrize("path", PATH_ENDPOINTS)
def test_sweep_bad_values_in_path_parameters_get_a_4xx_json_with_a_code(world, path, bad):
    response = world.client.get(_fill(world, path).format(bad=URL_VALUES[bad]))

    assert_json_4xx(response)


@pytest.mark.parametrize("bad", list(BAD_VALUES), ids=list(BAD_VALUES))
def test_sweep_bad_values_in_an_import_line_get_invalid_import_with_the_line_number(world, bad):
    lines = [
        json.dumps({"kind": "entity", "key": "bob", "type": "Person", "name": "Bob"}),
        json.dumps({"kind": "entity", "key": BAD_VALUES[bad], "type": "Person", "name": "Eve"}),
    ]

    response = world.client.post(
        f"/api/projects/{world.project.id}/graph/import",
        "\n".join(lines),
        content_type="application/x-ndjson",
    )

    error = assert_json_4xx(response, "invalid_import")
    assert error["line"] == 2
    assert not GraphObject.objects.filter(key="bob").exists()

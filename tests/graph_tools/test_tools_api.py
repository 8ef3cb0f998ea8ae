"""REST access to the graph tools: GET/POST /api/projects/{projectId}/graph/tools[/{toolName}]."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.graph_tools.models import GraphChange, GraphObject
from apps.graph_tools.registry import tool_names
from tests.factories import add_member, make_token, make_user
from tests.graph_tools.conftest import SmallGraph


@pytest.fixture
def member(graph: SmallGraph) -> Client:
    user = make_user()
    add_member(graph.project, user)
    client = Client()
    client.force_login(user)
    return client


def url(graph: SmallGraph, tool: str | None = None, project_ref: object = None) -> str:
    base = f"/api/projects/{project_ref or graph.project.id}/graph/tools"
    return f"{base}/{tool}" if tool else base


def test_list_tools_gives_name_description_schema_and_read_only(graph: SmallGraph, member: Client):
    response = member.get(url(graph))

    body = response.json()
    assert response.status_code == 200
    assert body["count"] == len(tool_names())  # which tools: tests/graph_tools/test_registry.py
    assert [t["name"] for t in body["items"]] == tool_names()
    traverse = next(t for t in body["items"] if t["name"] == "traverse_graph")
    assert set(traverse) == {"name", "description", "inputSchema", "readOnly"}
    assert traverse["readOnly"] is True
    assert traverse["inputSchema"]["type"] == "object"
    assert traverse["inputSchema"]["properties"]["max_depth"]["maximum"] == 5
    assert traverse["inputSchema"]["required"] == ["start_entity_id"]


def test_call_tool_answers_the_tool_result(graph: SmallGraph, member: Client):
    response = member.post(
        url(graph, "get_entity_edges"),
        {"entity_id": "alice", "direction": "in"},
        content_type="application/json",
    )

    assert response.status_code == 200
    body = response.json()
    assert body["entity"]["key"] == "alice"
    assert [e["other"]["key"] for e in body["edges"]] == ["carol"]


def test_call_tool_with_the_project_slug_and_no_body(graph: SmallGraph, member: Client):
    response = member.post(
        url(graph, "list_entity_types", project_ref=graph.project.slug), content_type="application/json"
    )

    assert response.status_code == 200
    assert response.json()["types"][0] == {"type": "Person", "count": 5}


def test_call_tool_with_bad_arguments_answers_400_naming_the_argument(graph: SmallGraph, member: Client):
    response = member.post(
        url(graph, "traverse_graph"),
        {"start_entity_id": "alice", "max_depth": 9},
        content_type="application/json",
    )

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_arguments"
    assert "max_depth" in body["error"]
    assert body["argument"] == "max_depth"


def test_list_tools_shows_query_paths_with_the_projects_own_types(graph: SmallGraph, member: Client):
    response = member.get(url(graph))

    query_paths = next(t for t in response.json()["items"] if t["name"] == "query_paths")
    hop = query_paths["inputSchema"]["$defs"]["Hop"]["properties"]
    relationship = next(b for b in hop["relationship"]["anyOf"] if b.get("type") == "string")
    assert relationship["enum"] == ["KNOWS", "LIVES_IN", "LOCATED_IN", "WORKS_AT"]
    assert "Person -WORKS_AT-> Company" in hop["relationship"]["description"]


def test_query_paths_over_rest_answers_the_path_result(graph: SmallGraph, member: Client):
    response = member.post(
        url(graph, "query_paths"),
        {"start": ["Alice Smith"], "hops": [{"relationship": "WORKS_AT"}, {"relationship": "LOCATED_IN"}]},
        content_type="application/json",
    )

    assert response.status_code == 200
    body = response.json()
    assert [r["key"] for r in body["results"]] == ["lisbon"]
    assert [s["entity"]["key"] for s in body["results"][0]["path"]] == ["alice", "acme", "lisbon"]


def test_query_paths_over_rest_with_an_unknown_relationship_answers_400_naming_it(
    graph: SmallGraph, member: Client
):
    response = member.post(
        url(graph, "query_paths"),
        {"start": ["Alice Smith"], "hops": [{"relationship": "LOVES"}]},
        content_type="application/json",
    )

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_arguments"
    assert body["argument"] == "hops.0.relationship"
    assert "KNOWS" in body["error"]


def test_call_tool_with_a_body_that_is_not_an_object_answers_400(graph: SmallGraph, member: Client):
    not_json = member.post(url(graph, "schema_version"), "{nope", content_type="application/json")
    a_list = member.post(url(graph, "schema_version"), "[1]", content_type="application/json")

    assert (not_json.status_code, not_json.json()["code"]) == (400, "invalid_arguments")
    assert (a_list.status_code, a_list.json()["code"]) == (400, "invalid_arguments")


def test_unknown_entity_answers_404(graph: SmallGraph, member: Client):
    response = member.post(
        url(graph, "find_similar"), {"entity_id": "nobody"}, content_type="application/json"
    )

    assert response.status_code == 404
    assert response.json()["code"] == "entity_not_found"


def test_unknown_tool_answers_404(graph: SmallGraph, member: Client):
    response = member.post(url(graph, "drop_everything"), {}, content_type="application/json")

    assert response.status_code == 404
    assert response.json()["code"] == "unknown_tool"


def test_a_project_i_am_not_a_member_of_answers_404(graph: SmallGraph):
    outsider = make_user()
    client = Client()
    client.force_login(outsider)

    listed = client.get(url(graph))
    called = client.post(url(graph, "list_entity_types"), {}, content_type="application/json")

    assert listed.status_code == 404
    assert called.status_code == 404
    assert called.json()["code"] == "project_not_found"


def test_bearer_token_calls_a_tool_and_no_token_answers_401(graph: SmallGraph):
    user = make_user()
    add_member(graph.project, user)
    token = make_token(user, graph.project)

    with_token = Client().post(
        url(graph, "search_entities"),
        {"query": "graph"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    without = Client().post(
        url(graph, "search_entities"), {"query": "graph"}, content_type="application/json"
    )

    assert with_token.status_code == 200
    assert [r["key"] for r in with_token.json()["results"]] == ["acme", "alice"]
    assert without.status_code == 401


def client_with_role(graph: SmallGraph, role: str) -> Client:
    user = make_user()
    add_member(graph.project, user, role)
    client = Client()
    client.force_login(user)
    return client


def test_viewer_calling_a_write_tool_gets_403_and_nothing_is_written(graph: SmallGraph):
    viewer = client_with_role(graph, "viewer")

    response = viewer.post(
        url(graph, "delete_entity"), {"entity_id": "alice"}, content_type="application/json"
    )

    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"
    assert GraphObject.objects.filter(id=graph.e["alice"].id).exists()


def test_editor_calling_a_write_tool_gets_approval_required_unless_the_operator_allows_direct_writes(
    graph: SmallGraph, settings
):
    editor = client_with_role(graph, "editor")

    refused = editor.post(
        url(graph, "delete_entity"), {"entity_id": "alice"}, content_type="application/json"
    )
    settings.KGCHAT_DIRECT_WRITES = True
    allowed = editor.post(url(graph, "delete_entity"), {"entity_id": "eve"}, content_type="application/json")

    assert refused.status_code == 403
    assert refused.json()["code"] == "approval_required"
    assert GraphObject.objects.filter(id=graph.e["alice"].id).exists()
    assert allowed.status_code == 200
    assert allowed.json()["graph_version"] == 1
    assert GraphChange.objects.get(entity_id=graph.e["eve"].id).authority == "direct"


def test_direct_write_with_bad_arguments_is_400_naming_the_argument(graph: SmallGraph, settings):
    settings.KGCHAT_DIRECT_WRITES = True
    editor = client_with_role(graph, "editor")

    response = editor.post(
        url(graph, "create_entity"),
        {"key": "k", "type": "T", "name": "", "x": 1},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_arguments"
    assert not GraphObject.objects.filter(key="k").exists()


def test_history_route_lists_an_entitys_changes_newest_first_even_after_its_deletion(
    graph: SmallGraph, settings
):
    settings.KGCHAT_DIRECT_WRITES = True
    editor = client_with_role(graph, "editor")
    viewer = client_with_role(graph, "viewer")
    for tool, arguments in [
        ("update_entity", {"entity_id": "eve", "description": "Astronomer in Berlin."}),
        ("create_relationship", {"src": "eve", "type": "KNOWS", "dst": "bob"}),
        ("delete_entity", {"entity_id": "eve"}),
    ]:
        assert editor.post(url(graph, tool), arguments, content_type="application/json").status_code == 200
    eve = graph.e["eve"].id

    history = viewer.get(f"/api/projects/{graph.project.id}/graph/entities/{eve}/history")
    missing = viewer.get(f"/api/projects/{graph.project.id}/graph/entities/nobody/history")

    assert history.status_code == 200
    items = history.json()["items"]
    assert [(i["version"], i["action"]) for i in items] == [
        (3, "delete_entity"),
        (3, "delete_relationship"),
        (2, "create_relationship"),
        (1, "update_entity"),
    ]
    assert items[-1]["before"]["description"] == "Astronomer who studies distant galaxies."
    assert items[-1]["after"]["description"] == "Astronomer in Berlin."
    assert {i["authority"] for i in items} == {"direct"}
    assert items[0]["user"] is not None
    assert missing.status_code == 404
    assert missing.json()["code"] == "entity_not_found"


def test_history_route_pages_with_limit_and_offset_and_counts_the_whole_history(graph: SmallGraph, settings):
    settings.KGCHAT_DIRECT_WRITES = True
    editor = client_with_role(graph, "editor")
    for description in ["One.", "Two.", "Three."]:
        response = editor.post(
            url(graph, "update_entity"),
            {"entity_id": "eve", "description": description},
            content_type="application/json",
        )
        assert response.status_code == 200
    base = f"/api/projects/{graph.project.id}/graph/entities/eve/history"

    first = editor.get(base, {"limit": 2}).json()
    rest = editor.get(base, {"limit": 2, "offset": 2}).json()

    assert first["count"] == rest["count"] == 3
    assert [i["version"] for i in first["items"]] == [3, 2]
    assert [i["version"] for i in rest["items"]] == [1]

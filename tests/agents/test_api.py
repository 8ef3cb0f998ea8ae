"""The REST routes of agent definitions and of the default-agent installation (design Decision 6)."""

import pytest
from django.test import Client

from apps.agents.defaults import GRAPH_QUERY_AGENT
from apps.agents.models import AgentDefinition
from tests.factories import add_member, make_agent_definition, make_project, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner():
    user = make_user()
    project = make_project(owner=user)
    client = Client()
    client.force_login(user)
    return client, project, user


def test_install_default_agents_creates_graph_query_agent_exactly_as_designed(owner):
    client, project, _ = owner

    response = client.post(f"/api/admin/projects/{project.id}/install-default-agents")

    assert response.status_code == 200
    assert response.json() == {"installed": ["graph-query-agent", "graph-curator-agent"], "existing": []}
    items = client.get(f"/api/projects/{project.id}/agent-definitions").json()["items"]
    agent = next(a for a in items if a["name"] == "graph-query-agent")
    assert agent["name"] == GRAPH_QUERY_AGENT["name"]
    assert agent["description"] == GRAPH_QUERY_AGENT["description"]
    assert agent["systemPrompt"] == GRAPH_QUERY_AGENT["system_prompt"]
    assert agent["model"] == {"name": "gemini-2.0-flash", "temperature": 0.1}
    assert agent["tools"] == GRAPH_QUERY_AGENT["tools"] and len(agent["tools"]) == 12
    assert (agent["flowType"], agent["isDefault"], agent["maxSteps"], agent["visibility"]) == (
        "single",
        True,
        15,
        "project",
    )


def test_installed_default_agents_offer_search_passages_after_query_paths(owner):
    client, project, _ = owner

    client.post(f"/api/admin/projects/{project.id}/install-default-agents")

    items = client.get(f"/api/projects/{project.id}/agent-definitions").json()["items"]
    for name in ("graph-query-agent", "graph-curator-agent"):
        tools = next(a for a in items if a["name"] == name)["tools"]
        assert tools.index("search_passages") == tools.index("query_paths") + 1


def test_install_default_agents_is_idempotent(owner):
    client, project, _ = owner
    client.post(f"/api/admin/projects/{project.id}/install-default-agents")

    again = client.post(f"/api/admin/projects/{project.id}/install-default-agents")

    assert again.json() == {"installed": [], "existing": ["graph-query-agent", "graph-curator-agent"]}
    assert AgentDefinition.objects.filter(project=project).count() == 2


def test_install_default_agents_needs_the_owner_role(owner):
    _, project, _ = owner
    editor = make_user()
    add_member(project, editor, "editor")
    client = Client()
    client.force_login(editor)

    response = client.post(f"/api/admin/projects/{project.id}/install-default-agents")

    assert response.status_code == 403
    assert not AgentDefinition.objects.exists()


def test_agent_definition_crud(owner):
    client, project, _ = owner
    body = {
        "name": "edges-only",
        "systemPrompt": "Be brief.",
        "model": {"name": "openai/x", "temperature": 0.3},
        "tools": ["get_entity_edges"],
        "maxSteps": 4,
    }

    created = client.post(
        f"/api/projects/{project.id}/agent-definitions", body, content_type="application/json"
    )
    definition_id = created.json()["id"]
    patched = client.patch(
        f"/api/agent-definitions/{definition_id}", {"maxSteps": 6}, content_type="application/json"
    )
    read = client.get(f"/api/agent-definitions/{definition_id}")
    deleted = client.delete(f"/api/agent-definitions/{definition_id}")
    gone = client.get(f"/api/agent-definitions/{definition_id}")

    assert created.status_code == 201
    assert created.json()["projectId"] == str(project.id)
    assert patched.json()["maxSteps"] == 6
    assert read.json()["tools"] == ["get_entity_edges"]
    assert deleted.status_code == 204
    assert gone.status_code == 404


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"name": "x", "tools": ["rm_rf"]}, "unknown tools"),
        ({"name": "x", "model": {"name": "m", "temperature": 7}}, "temperature"),
        ({"name": "x", "maxSteps": 0}, "max_steps"),
        ({"name": ""}, "name"),
    ],
)
def test_invalid_agent_definition_is_400_naming_the_problem(owner, body, fragment):
    client, project, _ = owner

    response = client.post(
        f"/api/projects/{project.id}/agent-definitions", body, content_type="application/json"
    )

    assert response.status_code == 400
    assert fragment in response.json()["error"]


def test_agent_definitions_of_another_project_are_404():
    user, stranger = make_user(), make_user()
    project = make_project(owner=user)
    definition = AgentDefinition.objects.create(project=project, name="secret")
    client = Client()
    client.force_login(stranger)

    assert client.get(f"/api/projects/{project.id}/agent-definitions").status_code == 404
    assert client.get(f"/api/agent-definitions/{definition.id}").status_code == 404
    assert client.delete(f"/api/agent-definitions/{definition.id}").status_code == 404


def test_agent_definition_list_is_paged_with_limit_and_offset_and_counts_them_all(owner):
    client, project, _ = owner
    for name in ("alpha", "beta", "gamma"):
        make_agent_definition(project, name=name)

    first = client.get(f"/api/projects/{project.id}/agent-definitions?limit=2").json()
    rest = client.get(f"/api/projects/{project.id}/agent-definitions?limit=2&offset=2").json()
    bad = client.get(f"/api/projects/{project.id}/agent-definitions?offset=-1")

    assert [d["name"] for d in first["items"]] == ["alpha", "beta"] and first["count"] == 3
    assert [d["name"] for d in rest["items"]] == ["gamma"] and rest["count"] == 3
    assert bad.status_code == 400 and "offset" in bad.json()["error"]

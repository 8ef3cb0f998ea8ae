"""Tool policy per agent definition (``toolPolicy``): validation, "never" only by owners, the effective
policy the API shows, whether a call needs approval, and the default curator agent."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.agents.definitions import default_agents_install
from apps.agents.models import AgentDefinition
from apps.agents.selectors import tool_approval_needed
from apps.graph_tools.registry import tool_names
from apps.projects.selectors import Principal
from tests.factories import add_member, make_agent_definition, make_project, make_user

pytestmark = pytest.mark.django_db

WRITES = [
    "create_entity",
    "update_entity",
    "delete_entity",
    "create_relationship",
    "update_relationship",
    "delete_relationship",
    "merge_entities",
    "unmerge_entities",
]


@pytest.fixture
def team():
    owner, editor, viewer = make_user(), make_user(), make_user()
    project = make_project(owner=owner)
    add_member(project, editor, "editor")
    add_member(project, viewer, "viewer")
    return {"project": project, "owner": owner, "editor": editor, "viewer": viewer}


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def create(team, who: str, **body):
    return client_of(team[who]).post(
        f"/api/projects/{team['project'].id}/agent-definitions",
        {"name": "curator", "tools": ["hybrid_search", "create_entity", "delete_entity"], **body},
        content_type="application/json",
    )


def test_new_definition_shows_always_for_each_of_its_write_tools(team):
    response = create(team, "editor")

    assert response.status_code == 201
    assert response.json()["toolPolicy"] == {
        "create_entity": {"approval": "always"},
        "delete_entity": {"approval": "always"},
    }


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"hybrid_search": {"approval": "never"}}, "read tool"),
        ({"drop_everything": {"approval": "never"}}, "unknown write tool"),
        ({"create_entity": {"approval": "sometimes"}}, "create_entity must be"),
        ({"create_entity": {"approval": "never", "why": "x"}}, "create_entity must be"),
        ({"create_entity": "never"}, "create_entity must be"),
    ],
)
def test_invalid_tool_policy_is_400_and_creates_nothing(team, policy, message):
    response = create(team, "owner", toolPolicy=policy)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_agent_definition"
    assert message in response.json()["error"]
    assert not AgentDefinition.objects.exists()


def test_editor_may_not_set_never_403_and_nothing_is_created(team):
    response = create(team, "editor", toolPolicy={"create_entity": {"approval": "never"}})

    assert response.status_code == 403
    assert not AgentDefinition.objects.exists()


def test_editor_may_not_change_a_tool_to_never_but_may_keep_or_tighten_an_owners_never(team):
    definition = create(team, "owner", toolPolicy={"create_entity": {"approval": "never"}}).json()
    path = f"/api/agent-definitions/{definition['id']}"
    editor = client_of(team["editor"])

    loosen = editor.patch(
        path,
        {"toolPolicy": {"create_entity": {"approval": "never"}, "delete_entity": {"approval": "never"}}},
        content_type="application/json",
    )
    keep = editor.patch(
        path, {"toolPolicy": {"create_entity": {"approval": "never"}}}, content_type="application/json"
    )
    tighten = editor.patch(
        path, {"toolPolicy": {"create_entity": {"approval": "always"}}}, content_type="application/json"
    )

    assert loosen.status_code == 403
    assert keep.status_code == 200
    assert tighten.status_code == 200
    assert tighten.json()["toolPolicy"]["create_entity"] == {"approval": "always"}
    assert AgentDefinition.objects.get(id=definition["id"]).tool_policy == {
        "create_entity": {"approval": "always"}
    }


def test_owner_sets_never_and_it_is_stored_and_shown(team):
    response = create(team, "owner", toolPolicy={"delete_entity": {"approval": "never"}})

    assert response.status_code == 201
    assert response.json()["toolPolicy"] == {
        "create_entity": {"approval": "always"},
        "delete_entity": {"approval": "never"},
    }


@pytest.mark.parametrize(
    ("tool", "who", "needed"),
    [
        ("hybrid_search", "viewer", False),
        ("create_entity", "owner", True),
        ("delete_entity", "editor", False),
        ("delete_entity", "owner", False),
        ("delete_entity", "viewer", True),
    ],
)
def test_approval_needed_for_definition_tool_and_principal(team, tool, who, needed):
    definition = make_agent_definition(
        team["project"],
        tools=["hybrid_search", "create_entity", "delete_entity"],
        tool_policy={"delete_entity": {"approval": "never"}},
    )

    assert (
        tool_approval_needed(definition=definition, tool_name=tool, principal=Principal(user=team[who]))
        is needed
    )


def test_install_adds_a_read_only_query_agent_and_a_curator_with_the_write_tools(team):
    result = default_agents_install(project=team["project"])
    again = default_agents_install(project=team["project"])

    query = AgentDefinition.objects.get(project=team["project"], name="graph-query-agent")
    curator = AgentDefinition.objects.get(project=team["project"], name="graph-curator-agent")
    assert result.installed == ["graph-query-agent", "graph-curator-agent"]
    assert again.installed == [] and again.existing == result.installed
    assert set(query.tools) <= set(tool_names(read_only=True))
    assert set(curator.tools) == set(query.tools) | set(WRITES)
    assert sorted(set(curator.tools) - set(query.tools)) == sorted(WRITES)
    assert curator.tool_policy == {} and curator.is_default is False

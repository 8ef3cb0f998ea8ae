"""The Django admin: every model is there; agent definitions are edited with tool and model fields."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.agents.models import AgentDefinition
from apps.graph_tools.importer import graph_import
from apps.graph_tools.registry import tool_names
from tests.factories import make_project

pytestmark = pytest.mark.django_db

PAGES = [
    "projects/project",
    "projects/projectmembership",
    "projects/apitoken",
    "graph_tools/graphobject",
    "graph_tools/graphrelationship",
    "graph_tools/graphchange",
    "graph_tools/writeapproval",
    "documents/document",
    "documents/passage",
    "documents/changeset",
    "documents/changesetitem",
    "agents/agentdefinition",
    "agents/agentrun",
    "chat/conversation",
]


@pytest.fixture
def admin_client():
    user = get_user_model().objects.create_superuser("root", "", "pw-root-123")
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("page", PAGES)
def test_every_model_has_an_admin_list(admin_client, page):
    assert admin_client.get(f"/admin/{page}/").status_code == 200


def test_agent_definition_form_offers_the_registry_tools_and_saves_model_and_temperature(admin_client):
    project = make_project()

    form = admin_client.get("/admin/agents/agentdefinition/add/").content.decode()
    response = admin_client.post(
        "/admin/agents/agentdefinition/add/",
        {
            "project": project.id,
            "name": "edges",
            "description": "",
            "system_prompt": "Be brief.",
            "tools": ["get_entity_edges", "hybrid_search"],
            "model_name": "openai/gpt-4o-mini",
            "temperature": "0.3",
            "flow_type": "single",
            "max_steps": "5",
            "visibility": "project",
            "sub_agents": "",
            "mcp_servers": "[]",
            "history_limit": "10",
            "token_budget": "32000",
        },
    )

    assert all(f'value="{name}"' in form for name in tool_names())
    assert response.status_code == 302, response.content.decode()[:2000]
    saved = AgentDefinition.objects.get(name="edges")
    assert saved.model == {"name": "openai/gpt-4o-mini", "temperature": 0.3}
    assert saved.tools == ["get_entity_edges", "hybrid_search"]


def test_runs_and_conversations_are_read_only(admin_client):
    assert admin_client.get("/admin/agents/agentrun/add/").status_code == 403
    assert admin_client.get("/admin/chat/conversation/add/").status_code == 403


def test_install_default_agents_admin_action(admin_client):
    project = make_project()

    admin_client.post(
        "/admin/projects/project/",
        {"action": "install_default_agents", "_selected_action": [str(project.id)]},
    )

    assert AgentDefinition.objects.filter(project=project, name="graph-query-agent").exists()


def agent_form(project, **fields):
    return {
        "project": project.id,
        "name": "curator",
        "description": "",
        "system_prompt": "",
        "tools": ["hybrid_search", "delete_entity"],
        "model_name": "gemini-2.0-flash",
        "temperature": "0.1",
        "flow_type": "single",
        "max_steps": "5",
        "visibility": "project",
        "sub_agents": "",
        "mcp_servers": "[]",
        "history_limit": "10",
        "token_budget": "32000",
        **fields,
    }


def test_agent_definition_form_validates_and_saves_the_tool_policy(admin_client):
    project = make_project()

    bad = admin_client.post(
        "/admin/agents/agentdefinition/add/",
        agent_form(project, tool_policy='{"hybrid_search": {"approval": "never"}}'),
    )
    good = admin_client.post(
        "/admin/agents/agentdefinition/add/",
        agent_form(project, tool_policy='{"delete_entity": {"approval": "never"}}'),
    )

    assert bad.status_code == 200 and "read tool" in bad.content.decode()
    assert good.status_code == 302
    assert AgentDefinition.objects.get(name="curator").tool_policy == {"delete_entity": {"approval": "never"}}


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("tool_policy", '{"delete_entity": {"approval": "never", "weight": NaN}}', "delete_entity.weight"),
        ("mcp_servers", '[{"stdio": "graph", "timeout": Infinity}]', "0.timeout"),
    ],
    ids=["tool-policy", "mcp-servers"],
)
def test_agent_definition_form_json_with_a_non_finite_number_is_a_form_error_naming_it(
    admin_client, field, value, named
):
    project = make_project()

    response = admin_client.post("/admin/agents/agentdefinition/add/", agent_form(project, **{field: value}))

    assert response.status_code == 200
    assert f"{named} is not a finite number" in response.content.decode()
    assert not AgentDefinition.objects.filter(name="curator").exists()


def test_admin_lists_graph_changes_filtered_by_project_and_action(admin_client):
    project, other = make_project(), make_project()
    graph_import(project=project, lines=['{"kind": "entity", "key": "k1", "type": "T", "name": "Kappa One"}'])
    graph_import(project=other, lines=['{"kind": "entity", "key": "k2", "type": "T", "name": "Kappa Two"}'])

    page = admin_client.get(
        f"/admin/graph_tools/graphchange/?project__id__exact={project.id}&action=import_entity"
    )
    none = admin_client.get(
        f"/admin/graph_tools/graphchange/?project__id__exact={project.id}&action=delete_entity"
    )

    assert page.status_code == 200
    assert "1 graph change" in page.content.decode()
    assert "0 graph changes" in none.content.decode()
    assert admin_client.get("/admin/graph_tools/graphchange/add/").status_code == 403


def test_an_api_token_for_a_project_the_user_is_not_in_is_a_form_error_not_a_500(admin_client):
    from apps.projects.models import ApiToken
    from tests.factories import make_user

    stranger = make_user("stranger")
    project = make_project()

    response = admin_client.post(
        "/admin/projects/apitoken/add/", {"user": stranger.pk, "project": project.pk, "name": "x"}
    )

    assert response.status_code == 200
    assert "is not a member of" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_an_api_token_for_a_member_is_created_and_shown_once(admin_client):
    from apps.projects.models import ApiToken
    from tests.factories import add_member, make_user

    member = make_user("member")
    project = make_project()
    add_member(project, member, "viewer")

    response = admin_client.post(
        "/admin/projects/apitoken/add/", {"user": member.pk, "project": project.pk, "name": "x"}, follow=True
    )

    assert response.status_code == 200
    assert ApiToken.objects.filter(user=member, project=project).count() == 1
    assert "copy it now" in response.content.decode()

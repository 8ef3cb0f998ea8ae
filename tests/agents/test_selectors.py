"""Reads of agent definitions (apps/agents/selectors.py): visibility in list, get and use in a turn.

Rule: a ``project`` definition is seen and used by every member; a ``private`` one by the
project's owners only, and for everybody else it does not exist.
"""

import pytest
from django.test import Client

from apps.agents.selectors import AgentDefinitionNotFound, agent_definition_check_usable
from apps.chat.models import Conversation, Message
from apps.projects.selectors import Principal
from tests.factories import add_member, make_agent_definition, make_project, make_user


@pytest.fixture
def team(db):
    owner, editor, viewer = make_user(), make_user(), make_user()
    project = make_project(owner=owner)
    add_member(project, editor, "editor")
    add_member(project, viewer, "viewer")
    shared = make_agent_definition(project, "shared", visibility="project")
    private = make_agent_definition(project, "private-one", visibility="private")
    return {
        "project": project,
        "owner": owner,
        "editor": editor,
        "viewer": viewer,
        "shared": shared,
        "private": private,
    }


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("who", "names"), [("owner", ["private-one", "shared"]), ("editor", ["shared"]), ("viewer", ["shared"])]
)
def test_private_agent_definition_is_listed_only_for_project_owners(team, who, names):
    client = client_of(team[who])

    response = client.get(f"/api/projects/{team['project'].id}/agent-definitions")

    assert response.status_code == 200
    assert [d["name"] for d in response.json()["items"]] == names
    assert response.json()["count"] == len(names)


@pytest.mark.django_db
def test_private_agent_definition_is_404_for_members_who_are_not_owners(team):
    url = f"/api/agent-definitions/{team['private'].id}"
    editor = client_of(team["editor"])

    read = editor.get(url)
    patched = editor.patch(url, {"maxSteps": 3}, content_type="application/json")
    deleted = editor.delete(url)
    owner_read = client_of(team["owner"]).get(url)

    assert [read.status_code, patched.status_code, deleted.status_code] == [404, 404, 404]
    assert read.json()["code"] == "agent_definition_not_found"
    assert owner_read.status_code == 200 and owner_read.json()["visibility"] == "private"
    team["private"].refresh_from_db()
    assert team["private"].max_steps != 3


@pytest.mark.django_db(transaction=True)
def test_starting_a_conversation_with_a_private_agent_as_a_viewer_returns_400_and_creates_nothing(team):
    body = {
        "message": "hi",
        "projectId": str(team["project"].id),
        "agentDefinitionId": str(team["private"].id),
    }

    response = client_of(team["viewer"]).post("/api/chat/stream", body, content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {"error": "agent definition not found", "code": "agent_definition_not_found"}
    assert not Conversation.objects.exists()
    assert not Message.objects.exists()


@pytest.mark.django_db
def test_a_definition_made_private_is_no_longer_usable_by_members_who_are_not_owners(team):
    definition = team["shared"]
    definition.visibility = "private"
    definition.save()

    with pytest.raises(AgentDefinitionNotFound) as refused:
        agent_definition_check_usable(principal=Principal(user=team["viewer"]), definition=definition)
    agent_definition_check_usable(principal=Principal(user=team["owner"]), definition=definition)

    assert refused.value.status == 400

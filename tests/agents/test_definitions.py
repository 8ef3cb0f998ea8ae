"""The writes of agent definitions (apps/agents/definitions.py): who may make what, default install."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.agents.definitions import agent_definition_create, agent_definition_update
from apps.agents.models import AgentDefinition
from apps.core.errors import PermissionDenied
from apps.projects.selectors import Principal
from tests.factories import add_member, make_agent_definition, make_project, make_user

pytestmark = pytest.mark.django_db


def test_install_default_agents_command_for_all_projects():
    make_project(name="One"), make_project(name="Two")
    out = StringIO()

    call_command("install_default_agents", "--all", stdout=out)

    assert AgentDefinition.objects.filter(name="graph-query-agent").count() == 2


def test_install_default_agents_command_into_one_project_by_slug_and_an_unknown_one_is_refused():
    project, other = make_project(), make_project()
    out = StringIO()

    call_command("install_default_agents", "--project", project.slug, stdout=out)
    with pytest.raises(CommandError, match="no project 'nowhere'"):
        call_command("install_default_agents", "--project", "nowhere")

    assert f"{project.slug}: installed graph-query-agent, graph-curator-agent" in out.getvalue()
    assert set(AgentDefinition.objects.values_list("project_id", flat=True)) == {project.id}
    assert not AgentDefinition.objects.filter(project=other).exists()


def test_editor_cannot_create_a_private_agent_definition_and_nothing_is_created():
    project = make_project()
    editor = make_user()
    add_member(project, editor, "editor")

    with pytest.raises(PermissionDenied):
        agent_definition_create(
            principal=Principal(user=editor),
            project_ref=project.id,
            fields={"name": "hidden", "visibility": "private"},
        )

    assert not AgentDefinition.objects.filter(project=project).exists()


def test_editor_cannot_make_a_project_agent_definition_private():
    project = make_project()
    editor = make_user()
    add_member(project, editor, "editor")
    definition = make_agent_definition(project, visibility="project")

    with pytest.raises(PermissionDenied):
        agent_definition_update(
            principal=Principal(user=editor), definition_id=definition.id, fields={"visibility": "private"}
        )

    definition.refresh_from_db()
    assert definition.visibility == "project"


def test_owner_creates_a_private_agent_definition():
    owner = make_user()
    project = make_project(owner=owner)

    definition = agent_definition_create(
        principal=Principal(user=owner),
        project_ref=project.slug,
        fields={"name": "mine", "visibility": "private"},
    )

    assert definition.visibility == "private"
    assert AgentDefinition.objects.get(id=definition.id).project == project

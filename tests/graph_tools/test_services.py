"""Writes and tool calls of members (apps/graph_tools/services.py): the role is checked inside."""

import pytest
from asgiref.sync import async_to_sync

from apps.core.errors import PermissionDenied
from apps.graph_tools.models import GraphObject
from apps.graph_tools.services import graph_import_as_member, tool_call_as_member
from apps.projects.selectors import Principal, ProjectNotFound
from tests.factories import add_member, make_entity, make_project, make_user
from tests.graph_tools.records import ALICE, jsonl

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("role", "refusal"), [("viewer", PermissionDenied), (None, ProjectNotFound)])
def test_only_editors_import_a_graph_and_a_refused_import_stores_nothing(role, refusal):
    project, user = make_project(), make_user()
    if role:
        add_member(project, user, role)

    with pytest.raises(refusal):
        async_to_sync(graph_import_as_member)(
            principal=Principal(user=user), project_ref=project.id, lines=[jsonl(ALICE)]
        )

    assert not GraphObject.objects.filter(project=project).exists()


def test_a_viewer_calls_a_graph_tool_and_a_non_member_is_project_not_found():
    project, viewer, stranger = make_project(), make_user(), make_user()
    add_member(project, viewer, "viewer")
    make_entity(project, "paris", type="City", name="Paris")

    result = async_to_sync(tool_call_as_member)(
        principal=Principal(user=viewer), project_ref=project.id, name="list_entity_types", arguments={}
    )
    with pytest.raises(ProjectNotFound):
        async_to_sync(tool_call_as_member)(
            principal=Principal(user=stranger), project_ref=project.id, name="list_entity_types", arguments={}
        )

    assert result == {"types": [{"type": "City", "count": 1}]}

"""The graph management commands: load_graph (a JSON Lines file) and its errors."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.graph_tools.models import GraphRelationship
from tests.factories import make_project
from tests.graph_tools.records import ALICE, BOB, KNOWS, jsonl

pytestmark = pytest.mark.django_db


def test_load_graph_command_imports_a_file(tmp_path: Path):
    project = make_project()
    path = tmp_path / "g.jsonl"
    path.write_text(jsonl(ALICE, BOB, KNOWS))
    out = StringIO()

    call_command("load_graph", str(path), "--project", project.slug, stdout=out)

    assert "entitiesCreated=2" in out.getvalue()
    assert GraphRelationship.objects.filter(project=project).count() == 1


def test_load_graph_command_reports_the_failing_line(tmp_path: Path):
    project = make_project()
    path = tmp_path / "g.jsonl"
    path.write_text(jsonl(ALICE, {"kind": "relationship", "type": "KNOWS", "src": "alice", "dst": "zed"}))

    with pytest.raises(CommandError, match="line 2"):
        call_command("load_graph", str(path), "--project", project.slug)


def test_mcp_server_command_refuses_an_unknown_project_before_serving():
    with pytest.raises(CommandError, match="no project 'nowhere'"):
        call_command("mcp_server", "--project", "nowhere")

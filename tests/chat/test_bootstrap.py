"""``manage.py bootstrap`` (``make setup``/``make run``): the demo is loaded, not embedded in the
foreground; the embedding worker embeds it while the server already answers (issue 16 item 1)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from apps.graph_tools.models import GraphObject, GraphObjectEmbedding
from apps.graph_tools.search import hybrid_search
from apps.projects.models import Project

pytestmark = pytest.mark.django_db


def test_bootstrap_loads_the_demo_without_embedding_it_and_full_text_finds_it_at_once():
    out = StringIO()

    call_command("bootstrap", "--demo-project", "demo-boot", stdout=out)

    project = Project.objects.get(slug="demo-boot")
    entities = GraphObject.objects.filter(project=project)
    assert entities.count() > 1000
    assert not GraphObjectEmbedding.objects.filter(project=project).exists(), (
        "no vector is computed in the foreground"
    )
    assert entities.filter(embedding_pending=True).count() == entities.count()
    assert f"{entities.count()} demo entities wait for the embedding worker" in out.getvalue()
    found = hybrid_search(project_id=project.id, embedder=None, query="Lisbon", limit=5)
    assert "Lisbon" in [row["name"] for row in found]

"""The page of a project's ontology (#51): import a file, see it in force and the relationships that
break it, switch to flagging, export links; a refused file shows its reason; a stranger gets 404."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.factories import add_member, make_user
from tests.graph_tools.conftest import build_small_graph

pytestmark = pytest.mark.django_db

ONTOLOGY = (
    b"entity_types: {Person: {}, Company: {}, City: {}}\nrelationship_types: {KNOWS: {range: [Person]}}\n"
)


def test_an_editor_imports_an_ontology_on_the_page_and_sees_what_breaks_it():
    graph = build_small_graph(embed=False)
    user = make_user()
    add_member(graph.project, user, "editor")
    client = Client()
    client.force_login(user)
    url = f"/projects/{graph.project.id}/ontology"

    empty = client.get(url)
    imported = client.post(url, {"action": "import", "file": SimpleUploadedFile("o.yaml", ONTOLOGY)})
    shown = client.get(url)
    flagged = client.post(url, {"action": "enforcement", "on_violation": "flag"}, follow=True)
    refused = client.post(url, {"action": "import", "file": SimpleUploadedFile("o.yaml", b"entity_types: 3")})

    assert empty.status_code == 200 and b"Propose an ontology" in empty.content
    assert imported.status_code == 302
    page = shown.content.decode()
    assert "KNOWS:" in page and 'id="ontology-violations"' in page
    assert "Relationships that break it (3)" in page  # LIVES_IN, LOCATED_IN, WORKS_AT are not declared
    assert f"/api/projects/{graph.project.id}/ontology/export?format=turtle" in page
    assert b"accepted and flagged for review" in flagged.content
    assert refused.status_code == 400 and b"expected a mapping" in refused.content


def test_the_ontology_page_is_not_found_for_a_stranger():
    graph = build_small_graph(embed=False)
    client = Client()
    client.force_login(make_user())

    assert client.get(f"/projects/{graph.project.id}/ontology").status_code == 404


def test_the_ontology_page_has_the_graph_pages_layout_and_a_viewer_sees_no_button_they_cannot_use():
    graph = build_small_graph(embed=False)
    editor, viewer = make_user(), make_user()
    add_member(graph.project, editor, "editor")
    add_member(graph.project, viewer, "viewer")
    url = f"/projects/{graph.project.id}/ontology"
    editors, viewers = Client(), Client()
    editors.force_login(editor)
    viewers.force_login(viewer)
    editors.post(url, {"action": "import", "file": SimpleUploadedFile("o.yaml", ONTOLOGY)})

    as_editor = editors.get(url).content.decode()
    as_viewer = viewers.get(url).content.decode()

    for page in (as_editor, as_viewer):
        assert "curation/curation.css" in page and 'class="curation-nav"' in page
        assert 'class="curation-main"' in page and "<style>" not in page
    assert 'name="action" value="enforcement"' in as_editor and 'value="import"' in as_editor
    assert 'method="post"' not in as_viewer and "<button" not in as_viewer
    assert "KNOWS:" in as_viewer and "Relationships that break it (3)" in as_viewer

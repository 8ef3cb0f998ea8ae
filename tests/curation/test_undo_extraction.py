"""Undo of an extraction's change set (#51): the inverse of what it wrote (its created relationships
deleted, then its created entities), proposed as a curation change set and reviewed the same way."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.documents.extraction.step import extraction_run_until_idle
from apps.documents.services import document_upload
from apps.graph_tools.models import GraphObject
from tests.documents.extraction import atlas
from tests.documents.extraction.atlas import TEXT, graph_relationships, perfect_extractor, start
from tests.factories import add_member, make_user

pytestmark = pytest.mark.django_db
# The Atlas project and its owner's client, as the extraction tests have them.
project, owner_client = atlas.project, atlas.owner_client


def test_undo_of_an_applied_extraction_removes_what_it_created(project, owner_client):
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    before = (
        set(GraphObject.objects.filter(project=project).values_list("key", flat=True)),
        graph_relationships(project),
    )
    start(owner_client, project, document)
    extraction_run_until_idle(provider=perfect_extractor())
    review = owner_client.get(f"/api/projects/{project.id}/documents/{document.id}/extraction").json()
    owner_client.post(
        f"/api/change-sets/{review['id']}/decision", {"approve": "all"}, content_type="application/json"
    )
    editor = make_user()
    add_member(project, editor, "editor")
    reviewer = Client()
    reviewer.force_login(editor)

    undo = owner_client.post(f"/api/change-sets/{review['id']}/undo")
    decided = reviewer.post(
        f"/api/change-sets/{undo.json()['id']}/decision", {"approve": "all"}, content_type="application/json"
    )

    assert undo.status_code == 201, undo.json()
    actions = [i["action"] for i in undo.json()["items"]]
    assert set(actions) == {"delete_relationship", "delete_entity"}
    assert actions.index("delete_entity") > actions.index("delete_relationship")
    assert decided.status_code == 200 and decided.json()["status"] == "applied"
    after = (
        set(GraphObject.objects.filter(project=project).values_list("key", flat=True)),
        graph_relationships(project),
    )
    assert after == before

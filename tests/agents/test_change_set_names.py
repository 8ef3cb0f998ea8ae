"""A name edited in a change set's review is kept whole up to an entity name's limit (512), or
refused with ``400 invalid_request`` naming the field, never cut (issue #47 item 10)."""

from __future__ import annotations

import pytest

from apps.documents.extraction.step import extraction_run_until_idle
from apps.documents.services import document_upload
from apps.graph_tools.models import GraphObject
from tests.documents.extraction.atlas import TEXT, owner_client, perfect_extractor, project, start

pytestmark = pytest.mark.django_db
__all__ = ["owner_client", "project"]  # the fixtures this module uses


def test_an_edited_name_is_kept_whole_up_to_512_characters_and_refused_past_them(project, owner_client):
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    extraction_run_until_idle(provider=perfect_extractor())
    review = owner_client.get(f"/api/projects/{project.id}/documents/{document.id}/extraction").json()
    nortown = next(i for i in review["items"] if i["values"].get("name") == "Nortown")
    decide = f"/api/change-sets/{review['id']}/decision"
    whole = "Nortown " + "n" * 504

    refused = owner_client.post(
        decide,
        {"approve": [], "edits": {str(nortown["id"]): {"name": whole + "!"}}},
        content_type="application/json",
    )
    kept = owner_client.post(
        decide,
        {"approve": [nortown["id"]], "edits": {str(nortown["id"]): {"name": whole}}},
        content_type="application/json",
    )

    assert (refused.status_code, refused.json()["code"], refused.json()["field"]) == (
        400,
        "invalid_request",
        "edits.name",
    )
    assert kept.status_code == 200, kept.json()
    assert GraphObject.objects.filter(project=project, name=whole).exists()

"""Extraction as a proposal (issue 26 item 3): a scripted perfect extractor proves the pipeline loses
nothing; review approves, rejects and edits items, written with one graph version bump and one audit
row per change naming the document and passage; who may start and decide; an owner's upload applied
at once when the project says so."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.documents.extraction import queue as graph_extraction
from apps.documents.extraction.step import extraction_run_until_idle
from apps.documents.models import ChangeSet, ExtractionSettings, Passage
from apps.documents.services import document_upload
from apps.graph_tools.models import GraphChange, GraphObject
from apps.graph_tools.versions import graph_version_current
from tests.documents.extraction.atlas import (
    TEXT,
    TRUE_RELATIONSHIPS,
    TRUTH,
    graph_relationships,
    perfect_extractor,
    start,
)
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def test_the_perfect_extractor_loses_nothing(project, owner_client):
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    before = set(graph_relationships(project))
    version = graph_version_current(project_id=project.id)

    started = start(owner_client, project, document)
    extracted = extraction_run_until_idle(provider=perfect_extractor())
    review = owner_client.get(f"/api/projects/{project.id}/documents/{document.id}/extraction").json()
    decided = owner_client.post(
        f"/api/change-sets/{review['id']}/decision", {"approve": "all"}, content_type="application/json"
    )

    assert started["status"] == "running" and started["progress"] == {
        "total": 3,
        "done": 0,
        "failed": 0,
        "pending": 3,
    }
    assert extracted == 3
    assert review["status"] == "review" and review["progress"]["done"] == 3
    actions = {
        (i["action"], i["values"].get("name"))
        for i in review["items"]
        if i["action"] != "create_relationship"
    }
    assert actions == {
        ("link_entity", "Freedonia"),
        ("create_entity", "Fredville"),
        ("create_entity", "Freedonian crown"),
        ("create_entity", "Nortown"),
    }
    link = next(i for i in review["items"] if i["action"] == "link_entity")
    assert link["evidence"]["method"] == "name" and link["evidence"]["entity"]["name"] == "Freedonia"
    assert decided.status_code == 200, decided.json()
    assert decided.json()["status"] == "applied"
    assert graph_relationships(project) - before == TRUE_RELATIONSHIPS
    assert GraphObject.objects.filter(project=project, name="Freedonia").count() == 1
    assert graph_version_current(project_id=project.id) == version + 1
    changes = list(GraphChange.objects.filter(project=project, version=version + 1))
    assert len(changes) == 3 + 4
    assert {c.authority for c in changes} == {"extraction"}
    passages = {p.id: p.text for p in Passage.objects.filter(document=document)}
    for change in changes:
        assert change.document_id == document.id
        text = passages[change.passage_id]
        if change.action == "create_relationship":
            src = GraphObject.objects.get(id=change.src_id).name
            dst = GraphObject.objects.get(id=change.dst_id).name
            triple = {"source": src, "type": change.after["type"], "target": dst}
            assert triple in TRUTH[text]["relationships"]
        else:
            assert change.after["name"] in [e["name"] for e in TRUTH[text]["entities"]]


def test_review_approves_some_rejects_one_and_edits_one(project, owner_client):
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    extraction_run_until_idle(provider=perfect_extractor())
    review = owner_client.get(f"/api/projects/{project.id}/documents/{document.id}/extraction").json()
    items = {
        i["values"].get("name") or (i["values"]["sourceName"], i["values"]["targetName"]): i
        for i in review["items"]
    }
    version = graph_version_current(project_id=project.id)

    first = owner_client.post(
        f"/api/change-sets/{review['id']}/decision",
        {
            "approve": [
                items["Fredville"]["id"],
                items["Nortown"]["id"],
                items[("Fredville", "Nortown")]["id"],
            ],
            "reject": [items["Freedonian crown"]["id"]],
            "edits": {str(items["Nortown"]["id"]): {"name": "Nortown-on-Fred"}},
        },
        content_type="application/json",
    ).json()
    rest = owner_client.post(
        f"/api/change-sets/{review['id']}/decision", {"approve": "all"}, content_type="application/json"
    ).json()
    again = owner_client.post(
        f"/api/change-sets/{review['id']}/decision", {"approve": "all"}, content_type="application/json"
    )

    assert first["status"] == "review"
    assert GraphObject.objects.filter(project=project, name="Nortown-on-Fred").exists()
    assert not GraphObject.objects.filter(project=project, name="Freedonian crown").exists()
    assert ("Fredville", "BORDERS", "Nortown-on-Fred") in graph_relationships(project)
    assert graph_version_current(project_id=project.id) == version + 2
    statuses = {
        i["values"].get("type"): i["status"] for i in rest["items"] if i["action"] == "create_relationship"
    }
    assert statuses["CAPITAL_OF"] == "applied"
    assert statuses["USES_CURRENCY"] == "failed"  # its currency was rejected
    assert rest["status"] == "applied"
    assert (again.status_code, again.json()["code"]) == (409, "change_set_not_pending")


def test_a_viewer_cannot_start_or_decide_and_outsiders_see_nothing(project, owner_client):
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    review = start(owner_client, project, document)
    viewer, outsider = make_user(), make_user()
    from tests.factories import add_member

    add_member(project, viewer, role="viewer")
    as_viewer, as_outsider = Client(), Client()
    as_viewer.force_login(viewer)
    as_outsider.force_login(outsider)

    refused = as_viewer.post(f"/api/projects/{project.id}/documents/{document.id}/extraction")
    decide = as_viewer.post(
        f"/api/change-sets/{review['id']}/decision", {"approve": "all"}, content_type="application/json"
    )
    hidden = as_outsider.get(f"/api/change-sets/{review['id']}")

    assert (refused.status_code, decide.status_code) == (403, 403)
    assert (hidden.status_code, hidden.json()["code"]) == (404, "change_set_not_found")
    assert as_viewer.get(f"/api/change-sets/{review['id']}").status_code == 200


def test_an_owner_s_upload_is_applied_at_once_when_the_project_says_so(project):
    ExtractionSettings.objects.create(project=project, owners_auto_approve=True)
    owner = project.memberships.get().user
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document

    graph_extraction.extraction_start(document=document, model="scripted/x", user_id=owner.pk)
    extraction_run_until_idle(provider=perfect_extractor())

    assert ChangeSet.objects.get(document=document).status == "applied"
    assert {c.authority for c in GraphChange.objects.filter(project=project, document_id=document.id)} == {
        "extraction_auto"
    }

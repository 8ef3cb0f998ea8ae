"""The admin's pages of documents, passages, change sets and their items: read-only lists with their
state, filtered by project and state, and each row's page, for a superuser."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.agents.llm.base import ToolCall
from apps.agents.llm.scripted import ScriptedProvider
from apps.documents.extraction.queue import extraction_start
from apps.documents.extraction.spec import TOOL_NAME
from apps.documents.extraction.step import extraction_run_until_idle
from apps.documents.models import ChangeSet, ChangeSetItem, Document, Passage
from apps.documents.services import document_upload
from tests.factories import make_entity, make_project, make_relationship

pytestmark = pytest.mark.django_db

TEXT = "Fredville is the capital of Freedonia.\n\nNortown lies in Freedonia.\n"


def extractor() -> ScriptedProvider:
    """Finds Freedonia and the town each passage names."""

    def respond(messages: list[Any], tools: list[Any]) -> list[Any]:
        town = "Fredville" if "Fredville" in messages[-1].content else "Nortown"
        facts = {
            "entities": [
                {"name": town, "type": "City", "description": ""},
                {"name": "Freedonia", "type": "Country", "description": ""},
            ],
            "relationships": [{"source": town, "type": "LOCATED_IN", "target": "Freedonia"}],
        }
        return [ToolCall(id="x", name=TOOL_NAME, arguments=facts)]

    return ScriptedProvider(responder=respond)


@pytest.fixture
def admin_client():
    user = get_user_model().objects.create_superuser("root", "", "pw-root-123")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def extracted():
    """A project whose document was extracted into a change set waiting for review; another
    project's document, never extracted."""
    project = make_project(name="Atlas")
    make_relationship(
        project,
        make_entity(project, "city:y", type="City"),
        "LOCATED_IN",
        make_entity(project, "country:x", type="Country"),
    )
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    extraction_start(document=document, model="scripted/x", user_id=None)
    extraction_run_until_idle(provider=extractor())
    other = make_project(name="Elsewhere")
    document_upload(project=other, name="notes.txt", data=b"Nothing to see.")
    return {"project": project, "other": other, "document": document}


PAGES = {
    "document": lambda: Document.objects.get(name="atlas.md"),
    "passage": lambda: Passage.objects.filter(document__name="atlas.md").first(),
    "changeset": lambda: ChangeSet.objects.get(),
    "changesetitem": lambda: ChangeSetItem.objects.filter(action="create_relationship").first(),
}


@pytest.mark.parametrize("model", PAGES)
def test_each_list_and_each_row_s_page_answer_a_superuser(admin_client, extracted, model):
    row = PAGES[model]()

    listed = admin_client.get(f"/admin/documents/{model}/")
    page = admin_client.get(f"/admin/documents/{model}/{row.pk}/change/")

    assert listed.status_code == 200
    assert page.status_code == 200


def test_lists_filter_by_project_and_state(admin_client, extracted):
    project, other = extracted["project"], extracted["other"]

    documents = admin_client.get(f"/admin/documents/document/?project__id__exact={other.id}").content.decode()
    in_review = admin_client.get(
        f"/admin/documents/changeset/?project__id__exact={project.id}&status__exact=review"
    ).content.decode()
    applied = admin_client.get("/admin/documents/changeset/?status__exact=applied").content.decode()
    done = admin_client.get(
        f"/admin/documents/passage/?project__id__exact={project.id}&extraction_state__exact=done"
    ).content.decode()
    items = admin_client.get(
        f"/admin/documents/changesetitem/?change_set__project__id__exact={project.id}&status__exact=linked"
    ).content.decode()

    assert "notes.txt" in documents and "atlas.md" not in documents
    assert "atlas.md" in in_review and "Waiting for review" in in_review
    assert "0 change sets" in applied
    assert "2 passages" in done
    # Freedonia was linked to nothing (the graph has no Freedonia): every entity is a create.
    assert "0 change set items" in items


def test_lists_search_passages_by_text_and_items_by_their_values(admin_client, extracted):
    passages = admin_client.get("/admin/documents/passage/?q=Nortown").content.decode()
    items = admin_client.get("/admin/documents/changesetitem/?q=Fredville").content.decode()

    assert "1 passage" in passages and "Nortown lies in Freedonia" in passages
    assert "City Fredville" in items and "City Nortown" not in items


def test_a_document_s_page_links_to_its_passages_and_change_sets(admin_client, extracted):
    document = extracted["document"]
    change_set = ChangeSet.objects.get(document=document)

    page = admin_client.get(f"/admin/documents/document/{document.pk}/change/").content.decode()
    passages = admin_client.get(f"/admin/documents/passage/?document__id__exact={document.pk}")
    items = admin_client.get(f"/admin/documents/changesetitem/?change_set__id__exact={change_set.pk}")

    assert f"document__id__exact={document.pk}" in page and "Fredville is the capital" in page
    assert passages.status_code == 200 and "2 passages" in passages.content.decode()
    assert items.status_code == 200
    assert (
        f"{ChangeSetItem.objects.filter(change_set=change_set).count()} change set items"
        in items.content.decode()
    )


def test_nothing_is_added_or_changed_through_these_pages(admin_client, extracted):
    change_set = ChangeSet.objects.get()

    refused = [admin_client.get(f"/admin/documents/{model}/add/").status_code for model in PAGES]
    posted = admin_client.post(
        f"/admin/documents/changeset/{change_set.pk}/change/", {"status": "applied", "model": "x"}
    )

    assert refused == [403, 403, 403, 403]
    assert posted.status_code == 403
    change_set.refresh_from_db()
    assert change_set.status == "review"

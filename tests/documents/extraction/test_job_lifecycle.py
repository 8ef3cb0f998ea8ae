"""An extraction job's life: failures are retried with backoff and a passage that keeps failing is
skipped, a changed paragraph re-extracts only its passage, a deleted document stops its job, and a
restarted worker resumes a passage whose claim lapsed."""

from __future__ import annotations

from typing import Any

import pytest

from apps.agents.llm.scripted import ScriptedProvider, error
from apps.documents.extraction import queue as graph_extraction
from apps.documents.extraction.step import extraction_run_until_idle, extraction_step
from apps.documents.models import ChangeSet, Document, Passage
from apps.documents.services import document_upload
from tests.documents.extraction.atlas import (
    P1,
    P2,
    P3,
    TEXT,
    TRUTH,
    passage_of,
    perfect_extractor,
    start,
)

pytestmark = pytest.mark.django_db


def test_model_errors_are_retried_with_backoff_and_a_passage_that_keeps_failing_is_skipped(
    project, owner_client, monkeypatch
):
    monkeypatch.setattr(graph_extraction, "BACKOFF_SECONDS", 0.0)
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    perfect = perfect_extractor()
    calls: list[str] = []

    def flaky(messages: list[Any], tools: list[Any]) -> list[Any]:
        text = passage_of(messages)
        calls.append(text)
        if text == P2 or (text == P1 and calls.count(P1) == 1):
            return error("rate limited", status=429)
        return perfect.responder(messages, tools)  # type: ignore[misc]

    extraction_run_until_idle(provider=ScriptedProvider(responder=flaky))
    review = owner_client.get(f"/api/projects/{project.id}/documents/{document.id}/extraction").json()

    assert calls.count(P1) == 2 and calls.count(P2) == graph_extraction.EXTRACTION_ATTEMPTS
    failed = Passage.objects.get(document=document, text=P2)
    assert (failed.extraction_state, failed.extraction_error) == ("failed", "rate limited")
    assert review["status"] == "review"
    assert review["progress"] == {"total": 3, "done": 2, "failed": 1, "pending": 0}
    assert "Nortown" in {i["values"].get("name") for i in review["items"]}


def test_a_changed_paragraph_re_extracts_only_its_passage(project, owner_client):
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    extraction_run_until_idle(provider=perfect_extractor())
    first = owner_client.get(f"/api/projects/{project.id}/documents/{document.id}/extraction").json()
    owner_client.post(
        f"/api/change-sets/{first['id']}/decision", {"approve": "all"}, content_type="application/json"
    )
    changed = P3.replace("as well", "too")
    truth = {
        **TRUTH,
        changed: {
            "entities": [{"name": "Nortown", "type": "City", "description": "A town."}],
            "relationships": [],
        },
    }
    document_upload(project=project, name="atlas.md", data=TEXT.replace(P3, changed).encode())
    model = perfect_extractor(truth)

    second = start(owner_client, project, document)
    extraction_run_until_idle(provider=model)

    assert second["progress"]["total"] == 1
    assert [passage_of(c.messages) for c in model.calls] == [changed]
    latest = ChangeSet.objects.filter(document=document).first()
    assert latest is not None and latest.status == "empty"  # Nortown is in the graph now: only a link


def test_a_deleted_document_stops_its_job(project, owner_client, settings):
    settings.KGCHAT_EXTRACTION_CONCURRENCY = 2  # the default, said here
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    model = perfect_extractor()

    def delete_the_document() -> None:  # after the first answer is stored, the second still asked
        Document.objects.filter(id=document.id).delete()

    first = extraction_step(provider=model, after_each=delete_the_document)
    more = extraction_run_until_idle(provider=model)

    assert first == 2 and more == 0 and len(model.calls) == 2  # two asked at once, the third never
    assert not ChangeSet.objects.exists() and not Passage.objects.exists()


def test_a_restarted_worker_resumes_a_passage_whose_claim_lapsed(project, owner_client):
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    claimed = graph_extraction.extraction_claim()  # a worker took it, then died
    assert claimed is not None

    before = extraction_run_until_idle(provider=perfect_extractor())
    Passage.objects.filter(id=claimed.id).update(extraction_not_before=None)  # its lease ran out
    after = extraction_run_until_idle(provider=perfect_extractor())

    assert (before, after) == (2, 1)
    assert ChangeSet.objects.get(document=document).status == "review"

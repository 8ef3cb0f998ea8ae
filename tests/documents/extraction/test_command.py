"""``manage.py extract_document`` extracts the passages showing its progress, also when the model
cannot be had."""

from __future__ import annotations

import pytest

from apps.documents.services import document_upload
from tests.documents.extraction.atlas import (
    TEXT,
    perfect_extractor,
)

pytestmark = pytest.mark.django_db


def test_the_command_extracts_the_passages_showing_its_progress(project, settings):
    import io

    from django.core.management import call_command

    from apps.agents.llm.scripted import register_script, unregister_script

    register_script("perfect-extractor", perfect_extractor())
    settings.KGCHAT_MODEL = "scripted/perfect-extractor"
    document_upload(project=project, name="atlas.md", data=TEXT.encode())
    out = io.StringIO()
    try:
        call_command("extract_document", "atlas.md", project=project.slug, run=True, stdout=out)
    finally:
        unregister_script("perfect-extractor")

    lines = out.getvalue().splitlines()
    # After each passage answered (two asked at a time, KGCHAT_EXTRACTION_CONCURRENCY's default).
    assert lines[:3] == [f"atlas.md: {n}/3 passages (0 failed)" for n in (1, 2, 3)]
    assert " review; passages 3 done, 0 failed, 0 waiting; 8 items" in lines[-1]


def test_the_command_shows_its_progress_when_the_model_cannot_be_had(project, settings):
    """A passage whose model cannot be resolved has its failure recorded without a call, and the
    command still shows the progress after it (it is tried again after its backoff)."""
    import io

    from django.core.management import call_command

    settings.KGCHAT_MODEL = "scripted/no-such-script"
    document_upload(project=project, name="atlas.md", data=TEXT.encode())
    out = io.StringIO()

    call_command("extract_document", "atlas.md", project=project.slug, run=True, stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[:3] == ["atlas.md: 0/3 passages (0 failed)"] * 3
    assert " running; passages 0 done, 0 failed, 3 waiting; 0 items" in lines[-1]
    assert len(lines) == 4

"""Documents moved to an app of their own (#48) by state-only migrations: a database migrated before
the move keeps its rows, and the content types of the moved models (which the admin's permissions
and history point at) follow them to the ``documents`` app, keeping their ids."""

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType

from apps.documents.models import Document, Passage
from tests.support.migrations import migrate, migrate_to_latest

BEFORE_THE_MOVE = [("graph_tools", "0022_mention_index")]


@pytest.fixture
def before_the_move(transactional_db):
    apps = migrate(BEFORE_THE_MOVE)
    yield apps
    migrate_to_latest()


def test_an_existing_database_keeps_its_documents_and_their_content_types_follow_them(before_the_move):
    apps = before_the_move
    project = apps.get_model("projects", "Project").objects.create(name="Before", slug="before-move")
    document = apps.get_model("graph_tools", "Document").objects.create(
        project=project, name="old.txt", format="text", content_hash="h", size_bytes=4, text="Old."
    )
    apps.get_model("graph_tools", "Passage").objects.create(
        project=project, document=document, ordinal=0, text="Old.", content_hash="h", char_start=0, char_end=4
    )
    old_type, _ = ContentType.objects.get_or_create(app_label="graph_tools", model="document")
    Permission.objects.get_or_create(
        content_type=old_type, codename="view_document", defaults={"name": "Can view document"}
    )

    migrate_to_latest()

    ContentType.objects.clear_cache()
    moved = ContentType.objects.get(app_label="documents", model="document")
    assert moved.id == old_type.id
    assert not ContentType.objects.filter(app_label="graph_tools", model__in=["document", "passage"]).exists()
    assert moved.permission_set.filter(codename="view_document").exists()
    assert [d.name for d in Document.objects.filter(project_id=project.id)] == ["old.txt"]
    assert [p.text for p in Passage.objects.filter(document_id=document.id)] == ["Old."]


def test_a_content_type_under_both_labels_keeps_the_older_one_with_its_permissions(before_the_move):
    older, _ = ContentType.objects.get_or_create(app_label="graph_tools", model="passage")
    Permission.objects.get_or_create(
        content_type=older, codename="view_passage", defaults={"name": "Can view passage"}
    )
    ContentType.objects.filter(app_label="documents", model="passage").delete()
    newer = ContentType.objects.create(app_label="documents", model="passage")

    migrate_to_latest()

    ContentType.objects.clear_cache()
    kept = ContentType.objects.get(app_label="documents", model="passage")
    assert kept.id == older.id != newer.id
    assert kept.permission_set.filter(codename="view_passage").exists()

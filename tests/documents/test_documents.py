"""Documents (issue 26 item 1): upload over REST and with the command; text, Markdown, HTML and PDF
read into passages with their positions; re-uploads keep unchanged passages; a file that cannot be
read gets its own error and nothing is stored; passages are searched by the ``search_passages`` tool
and embedded by the background worker."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import Client

from apps.documents.embeddings import pending_passages_embed
from apps.documents.models import Document, Passage, PassageEmbedding
from apps.graph_tools.registry import tool_names
from tests.documents.documents_files import pdf_encrypted, pdf_scanned, pdf_with_pages
from tests.factories import add_member, make_project, make_user
from tests.graph_tools.conftest import call_tool

pytestmark = pytest.mark.django_db

HANDBOOK = (
    "# Harbour handbook\n\n"
    "The lighthouse of Porto Velho was built in 1871 by the engineer Marta Lobo.\n\n"
    "Fishing boats leave the harbour at dawn and return before noon.\n\n"
    "The harbour master keeps the tide tables in the old customs house.\n"
)


def upload(client, project, name, data, content_type="application/octet-stream", **extra):
    file = io.BytesIO(data)
    file.name = name
    return client.post(f"/api/projects/{project.id}/documents", {"file": file, **extra})


def test_uploading_markdown_stores_the_document_and_its_passages_with_positions(editor):
    client, project = editor

    response = upload(client, project, "handbook.md", HANDBOOK.encode())

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["created"] is True and body["changed"] is True
    assert body["document"]["format"] == "markdown"
    assert body["document"]["passages"] == 4 == body["passagesAdded"]
    assert body["document"]["passagesPending"] == 4
    document = Document.objects.get(project=project)
    passages = list(Passage.objects.filter(document=document).order_by("ordinal"))
    assert [p.text for p in passages][1] == (
        "The lighthouse of Porto Velho was built in 1871 by the engineer Marta Lobo."
    )
    for p in passages:
        assert document.text[p.char_start : p.char_end] == p.text
        assert p.page is None
    listed = client.get(f"/api/projects/{project.id}/documents/{document.id}/passages").json()
    assert [item["ordinal"] for item in listed["items"]] == [0, 1, 2, 3]
    assert listed["items"][1]["charStart"] == passages[1].char_start


def test_uploading_a_pdf_reads_its_text_layer_page_by_page(editor):
    client, project = editor
    pdf = pdf_with_pages([["The lighthouse was built in 1871."], ["The harbour opens at dawn."]])

    response = upload(client, project, "report.pdf", pdf)

    assert response.status_code == 201, response.json()
    assert response.json()["document"]["pages"] == 2
    passages = list(Passage.objects.filter(document__project=project).order_by("ordinal"))
    assert [(p.page, p.text) for p in passages] == [
        (1, "The lighthouse was built in 1871."),
        (2, "The harbour opens at dawn."),
    ]


def test_html_is_read_as_its_visible_text_only(editor):
    client, project = editor
    html = (
        "<html><head><title>Harbour</title><style>p {color: red}</style>"
        "<script>fetch('https://example.invalid/x')</script></head>"
        "<body><h1>Tides</h1><p>High tide comes <b>twice</b> a day.</p>"
        "<p>See <a href='https://example.invalid/tides'>the tables</a>.<img src='https://example.invalid/i.png'></p>"
        "</body></html>"
    )

    response = upload(client, project, "tides.html", html.encode())

    assert response.status_code == 201
    text = Document.objects.get(project=project).text
    assert text == "Harbour\n\nTides\n\nHigh tide comes twice a day.\n\nSee the tables."
    assert "example.invalid" not in text and "color" not in text


def test_reuploading_the_same_content_changes_nothing(editor):
    client, project = editor
    first = upload(client, project, "handbook.md", HANDBOOK.encode()).json()
    before = list(Passage.objects.order_by("ordinal").values_list("id", "embedding_pending"))

    again = upload(client, project, "handbook.md", HANDBOOK.encode())

    assert again.status_code == 200
    body = again.json()
    assert body["changed"] is False and body["passagesAdded"] == 0 and body["passagesRemoved"] == 0
    assert body["document"]["updatedAt"] == first["document"]["updatedAt"]
    assert list(Passage.objects.order_by("ordinal").values_list("id", "embedding_pending")) == before


def test_a_changed_paragraph_reprocesses_only_its_passage(editor):
    client, project = editor
    upload(client, project, "handbook.md", HANDBOOK.encode())
    while pending_passages_embed(project_id=project.id):
        pass
    kept = {p.content_hash: p.id for p in Passage.objects.all()}
    changed = HANDBOOK.replace("return before noon", "return at sunset")

    response = upload(client, project, "handbook.md", changed.encode())

    body = response.json()
    assert (body["changed"], body["passagesKept"], body["passagesAdded"], body["passagesRemoved"]) == (
        True,
        3,
        1,
        1,
    )
    passages = list(Passage.objects.order_by("ordinal"))
    fresh = [p for p in passages if p.id not in kept.values()]
    assert [p.text for p in fresh] == ["Fishing boats leave the harbour at dawn and return at sunset."]
    assert [p.embedding_pending for p in passages] == [False, False, True, False]
    assert PassageEmbedding.objects.count() == 3
    document = Document.objects.get()
    assert all(document.text[p.char_start : p.char_end] == p.text for p in passages)


def test_an_added_paragraph_shifts_positions_but_keeps_the_passages(editor):
    client, project = editor
    upload(client, project, "handbook.md", HANDBOOK.encode())
    ids = list(Passage.objects.order_by("ordinal").values_list("id", flat=True))

    body = upload(client, project, "handbook.md", ("Preface.\n\n" + HANDBOOK).encode()).json()

    assert (body["passagesKept"], body["passagesAdded"], body["passagesRemoved"]) == (4, 1, 0)
    assert list(Passage.objects.order_by("ordinal").values_list("id", flat=True))[1:] == ids
    document = Document.objects.get()
    assert all(document.text[p.char_start : p.char_end] == p.text for p in Passage.objects.all())


@pytest.mark.parametrize(
    ("name", "data", "status", "code"),
    [
        ("secret.pdf", pdf_encrypted(), 400, "document_encrypted"),
        ("broken.pdf", b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R", 400, "document_corrupt"),
        ("scan.pdf", pdf_scanned(), 400, "document_without_text"),
        ("fake.pdf", b"just some words", 400, "document_corrupt"),
        ("photo.png", b"\x89PNG\r\n\x1a\n\x00\x00", 400, "document_corrupt"),
        ("movie.mp4", b"\x00\x00\x00\x18ftypmp42", 415, "unsupported_document_type"),
        ("notes.txt", b"caf\xe9 au lait", 400, "document_corrupt"),
        ("empty.md", b"  \n\n ", 400, "document_without_text"),
    ],
)
def test_an_unreadable_file_gets_its_error_and_nothing_is_stored(editor, name, data, status, code):
    client, project = editor

    response = upload(client, project, name, data)

    assert response.status_code == status, response.json()
    assert response.json()["code"] == code
    assert response.json()["error"]
    assert not Document.objects.exists() and not Passage.objects.exists()


@pytest.mark.parametrize("algorithm", ["RC4-40", "RC4-128", "AES-128", "AES-256"])
def test_a_pdf_with_only_an_owner_password_is_read(editor, algorithm):
    client, project = editor
    data = pdf_encrypted(("The harbour statement lists moorings.",), user_password="", algorithm=algorithm)

    response = upload(client, project, "statement.pdf", data)

    assert response.status_code == 201, response.json()
    assert list(Passage.objects.values_list("text", flat=True)) == ["The harbour statement lists moorings."]


def test_a_file_name_is_stored_whole_up_to_300_characters_and_refused_past_them(editor):
    client, project = editor
    whole = "n" * 276 + ".txt"

    stored = upload(client, project, whole, b"A long name.")
    refused = upload(client, project, "o" * 396 + ".txt", b"A longer name.")

    assert (stored.status_code, stored.json()["document"]["name"]) == (201, whole)
    assert (refused.status_code, refused.json()["code"], refused.json()["field"]) == (
        400,
        "invalid_request",
        "name",
    )
    assert list(Document.objects.values_list("name", flat=True)) == [whole]


def test_a_bad_new_version_leaves_the_stored_document_as_it_was(editor):
    client, project = editor
    upload(client, project, "report.pdf", pdf_with_pages([["The harbour opens at dawn."]]))
    before = list(Passage.objects.values_list("id", "text"))

    response = upload(client, project, "report.pdf", pdf_scanned())

    assert response.json()["code"] == "document_without_text"
    assert list(Passage.objects.values_list("id", "text")) == before
    assert Document.objects.get().page_count == 1


def test_size_and_page_limits_are_settings(editor, settings):
    client, project = editor
    settings.KGCHAT_DOCUMENT_MAX_BYTES = 100
    settings.KGCHAT_DOCUMENT_MAX_PAGES = 2

    too_large = upload(client, project, "long.txt", b"word " * 50)
    settings.KGCHAT_DOCUMENT_MAX_BYTES = 10_000_000
    too_many = upload(client, project, "long.pdf", pdf_with_pages([["a"], ["b"], ["c"]]))

    assert (too_large.status_code, too_large.json()["code"]) == (413, "document_too_large")
    assert (too_many.status_code, too_many.json()["code"]) == (413, "document_too_many_pages")
    assert not Document.objects.exists()


def test_viewers_cannot_upload_and_outsiders_do_not_see_the_project(editor):
    client, project = editor
    viewer, outsider = make_user(), make_user()
    add_member(project, viewer, role="viewer")
    as_viewer, as_outsider = Client(), Client()
    as_viewer.force_login(viewer)
    as_outsider.force_login(outsider)
    upload(client, project, "handbook.md", HANDBOOK.encode())

    refused = upload(as_viewer, project, "other.md", b"Some text.")
    hidden = as_outsider.get(f"/api/projects/{project.id}/documents")
    listed = as_viewer.get(f"/api/projects/{project.id}/documents")

    assert (refused.status_code, refused.json()["requiredRole"]) == (403, "editor")
    assert hidden.status_code == 404
    assert [d["name"] for d in listed.json()["items"]] == ["handbook.md"]


def test_a_missing_file_field_is_a_400(editor):
    client, project = editor

    response = client.post(f"/api/projects/{project.id}/documents", {"name": "x.md"})

    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")


def test_deleting_a_document_removes_its_passages(editor):
    client, project = editor
    document_id = upload(client, project, "handbook.md", HANDBOOK.encode()).json()["document"]["id"]

    response = client.delete(f"/api/projects/{project.id}/documents/{document_id}")
    again = client.delete(f"/api/projects/{project.id}/documents/{document_id}")

    assert response.status_code == 204
    assert (again.status_code, again.json()["code"]) == (404, "document_not_found")
    assert not Passage.objects.exists()


def test_search_passages_is_a_read_tool_of_the_one_registry():
    assert "search_passages" in tool_names(read_only=True)


def test_search_passages_finds_passages_by_text_at_once_and_by_meaning_once_embedded(editor):
    client, project = editor
    upload(client, project, "handbook.md", HANDBOOK.encode())

    by_text = call_tool(project, "search_passages", query="Who built the lighthouse?")
    while pending_passages_embed(project_id=project.id):
        pass
    by_meaning = call_tool(project, "search_passages", query="when do fishermen go out to sea", limit=2)

    top = by_text["results"][0]
    assert top["text"].startswith("The lighthouse of Porto Velho")
    assert top["document_name"] == "handbook.md"
    assert "key" not in top and "type" not in top
    assert by_text["embedding"] == {"pending": 4}
    assert by_meaning["results"][0]["text"].startswith("Fishing boats")
    assert "embedding" not in by_meaning


def test_search_passages_sees_only_its_own_project(editor):
    client, project = editor
    other = make_project(owner=make_user())
    upload(client, project, "handbook.md", HANDBOOK.encode())

    result = call_tool(other, "search_passages", query="lighthouse")

    assert result["results"] == []


def test_the_command_uploads_a_file_and_a_second_run_changes_nothing(tmp_path):
    project = make_project(owner=make_user())
    path = tmp_path / "handbook.md"
    path.write_text(HANDBOOK)
    out = io.StringIO()

    call_command("upload_document", str(path), project=project.slug, stdout=out)
    call_command("upload_document", str(path), project=project.slug, stdout=out)

    lines = out.getvalue().splitlines()
    assert "created" in lines[0] and "added=4" in lines[0]
    assert "unchanged" in lines[1]
    assert Passage.objects.filter(project=project).count() == 4

"""Documents over REST (issue 26): upload, re-upload, list, passages, delete, and every refusal."""

from __future__ import annotations

import pytest

from tests.blackbox.covers import covers
from tests.blackbox.world import World
from tests.graph_tools.documents_files import pdf_encrypted, pdf_scanned, pdf_with_pages

UPLOAD = "POST /api/projects/{project_id}/documents"
NOTES = b"# Notes\n\nThe ferry to the island leaves at nine.\n\nThe island has one bakery.\n"


def _file(name: str, data: bytes) -> dict[str, tuple[str, bytes, str]]:
    return {"file": (name, data, "application/octet-stream")}


@covers("POST /api/projects/{project_id}/documents", "201", "200")
@covers("GET /api/projects/{project_id}/documents", "200")
@covers("GET /api/projects/{project_id}/documents/{document_id}", "200")
@covers("GET /api/projects/{project_id}/documents/{document_id}/passages", "200")
def test_an_upload_is_split_into_passages_and_an_unchanged_reupload_writes_nothing(world: World) -> None:
    bob = world.api("bob")

    created = bob.call(UPLOAD, 201, files=_file("bb-notes.md", NOTES), project_id=world.project_id).json()
    again = bob.call(UPLOAD, 200, files=_file("bb-notes.md", NOTES), project_id=world.project_id).json()
    changed = bob.call(
        UPLOAD,
        200,
        files=_file("bb-notes.md", NOTES.replace(b"one bakery", b"two bakeries")),
        project_id=world.project_id,
    ).json()

    document = created["document"]
    assert (document["format"], document["passages"]) == ("markdown", 3)
    assert again["changed"] is False
    assert (changed["passagesKept"], changed["passagesAdded"], changed["passagesRemoved"]) == (2, 1, 1)
    listed = world.api("cy").call(
        "GET /api/projects/{project_id}/documents", 200, project_id=world.project_id
    )
    assert document["id"] in [d["id"] for d in listed.json()["items"]]
    one = world.api("cy").call(
        "GET /api/projects/{project_id}/documents/{document_id}",
        200,
        project_id=world.project_id,
        document_id=document["id"],
    )
    assert one.json()["name"] == "bb-notes.md"
    passages = world.api("cy").call(
        "GET /api/projects/{project_id}/documents/{document_id}/passages",
        200,
        project_id=world.project_id,
        document_id=document["id"],
    )
    assert [p["text"] for p in passages.json()["items"]][2] == "The island has two bakeries."


@covers(
    "POST /api/projects/{project_id}/documents",
    "415 unsupported_document_type",
    "413 document_too_large",
    "413 document_too_many_pages",
    "400 document_encrypted",
    "400 document_corrupt",
    "400 document_without_text",
    "400 invalid_request",
)
def test_each_unreadable_file_gets_its_own_error(world: World) -> None:
    bob, project = world.api("bob"), world.project_id

    bob.call(
        UPLOAD, 415, "unsupported_document_type", files=_file("x.png", b"\x89PNG\r\n"), project_id=project
    )
    bob.call(UPLOAD, 400, "document_encrypted", files=_file("x.pdf", pdf_encrypted()), project_id=project)
    bob.call(UPLOAD, 400, "document_corrupt", files=_file("x.pdf", b"%PDF-1.4 broken"), project_id=project)
    bob.call(UPLOAD, 400, "document_without_text", files=_file("x.pdf", pdf_scanned()), project_id=project)
    bob.call(UPLOAD, 400, "invalid_request", data={"name": "x.md"}, files={}, project_id=project)
    many = pdf_with_pages([["page"]] * 501)
    bob.call(UPLOAD, 413, "document_too_many_pages", files=_file("x.pdf", many), project_id=project)
    large = b"word " * (4 * 1024 * 1024 + 1)
    bob.call(UPLOAD, 413, "document_too_large", files=_file("x.txt", large), project_id=project)

    listed = bob.call("GET /api/projects/{project_id}/documents", 200, project_id=project).json()
    assert "x.pdf" not in [d["name"] for d in listed["items"]]


@covers("POST /api/projects/{project_id}/documents", "201", "400 document_encrypted")
@covers("POST /api/projects/{project_id}/graph/tools/{tool_name}", "200")
@pytest.mark.parametrize("algorithm", ["RC4-128", "AES-256"])
def test_a_pdf_with_only_an_owner_password_is_read_and_one_that_asks_for_a_password_is_refused(
    world: World, algorithm: str
) -> None:
    bob, project = world.api("bob"), world.project_id
    owner_only = pdf_encrypted(
        (f"The harbour statement {algorithm} lists quayside moorings.",),
        user_password="",
        algorithm=algorithm,
    )
    locked = pdf_encrypted(
        (f"The sealed ledger {algorithm} lists vault codes.",), user_password="secret", algorithm=algorithm
    )

    read = bob.call(
        UPLOAD, 201, files=_file(f"bb-owner-only-{algorithm}.pdf", owner_only), project_id=project
    )
    bob.call(
        UPLOAD,
        400,
        "document_encrypted",
        files=_file(f"bb-locked-{algorithm}.pdf", locked),
        project_id=project,
    )

    assert read.json()["document"]["passages"] == 1
    found = bob.call(
        "POST /api/projects/{project_id}/graph/tools/{tool_name}",
        200,
        json={"query": "quayside moorings"},
        project_id=project,
        tool_name="search_passages",
    ).json()["results"]
    assert (
        f"bb-owner-only-{algorithm}.pdf",
        f"The harbour statement {algorithm} lists quayside moorings.",
    ) in [(r["document_name"], r["text"]) for r in found]
    listed = bob.call("GET /api/projects/{project_id}/documents", 200, project_id=project).json()
    assert f"bb-locked-{algorithm}.pdf" not in [d["name"] for d in listed["items"]]


@covers("DELETE /api/projects/{project_id}/documents/{document_id}", "204", "404 document_not_found")
@covers("GET /api/projects/{project_id}/documents/{document_id}", "404 document_not_found")
def test_a_deleted_document_is_gone(world: World) -> None:
    bob = world.api("bob")
    document = bob.call(
        UPLOAD, 201, files=_file("bb-gone.txt", b"Short-lived."), project_id=world.project_id
    ).json()["document"]

    bob.call(
        "DELETE /api/projects/{project_id}/documents/{document_id}",
        204,
        project_id=world.project_id,
        document_id=document["id"],
    )

    for operation in (
        "GET /api/projects/{project_id}/documents/{document_id}",
        "DELETE /api/projects/{project_id}/documents/{document_id}",
    ):
        bob.call(
            operation, 404, "document_not_found", project_id=world.project_id, document_id=document["id"]
        )

"""Documents over REST (issue 26): upload, re-upload, list, passages, delete, and every refusal."""

from __future__ import annotations

import io

import pytest

from tests.blackbox.covers import covers
from tests.blackbox.world import World
from tests.documents.documents_files import (
    csv_suppliers,
    docx_encrypted,
    docx_report,
    pdf_encrypted,
    pdf_of_images,
    pdf_scanned,
    pdf_with_pages,
    png_scanned,
    pptx_deck,
    xlsx_two_sheets,
)

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
        UPLOAD,
        415,
        "unsupported_document_type",
        files=_file("x.mp4", b"\x00\x00\x00\x18ftypmp42"),
        project_id=project,
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


@covers("POST /api/projects/{project_id}/documents", "201", "400 invalid_request")
@covers("GET /api/projects/{project_id}/documents/{document_id}", "200")
def test_a_file_name_is_kept_whole_up_to_300_characters_and_refused_past_them(world: World) -> None:
    bob, project = world.api("bob"), world.project_id
    name_280, name_300 = "bb-" + "n" * 273 + ".txt", "bb-" + "m" * 293 + ".txt"
    emoji_300 = "bb-" + "\U0001f4c4" * 293 + ".txt"  # over Django's part headers as a file name

    kept = [
        bob.call(UPLOAD, 201, files=_file(name, b"Whole names."), project_id=project).json()["document"]
        for name in (name_280, name_300)
    ]
    by_field = bob.call(
        UPLOAD, 201, data={"name": emoji_300}, files=_file("x.txt", b"Emoji."), project_id=project
    ).json()["document"]
    too_long = bob.call(
        UPLOAD, 400, "invalid_request", files=_file("bb-" + "o" * 393 + ".txt", b"Cut?"), project_id=project
    ).json()
    too_long_field = bob.call(
        UPLOAD,
        400,
        "invalid_request",
        data={"name": "p" * 301},
        files=_file("x.txt", b"?"),
        project_id=project,
    ).json()

    assert [d["name"] for d in kept] == [name_280, name_300]
    read = bob.call(
        "GET /api/projects/{project_id}/documents/{document_id}",
        200,
        project_id=project,
        document_id=kept[0]["id"],
    ).json()
    assert read["name"] == name_280
    assert by_field["name"] == emoji_300
    assert too_long["field"] == too_long_field["field"] == "name"
    listed = bob.call(
        "GET /api/projects/{project_id}/documents", 200, project_id=project, params={"limit": 500}
    )
    assert not [d["name"] for d in listed.json()["items"] if d["name"].startswith(("bb-ooo", "ppp"))]


def _base64_part_cut_short() -> tuple[bytes, dict[str, str]]:
    body = (
        b"--bb-boundary\r\n"
        b'Content-Disposition: form-data; name="file"; filename="bb-b64.txt"\r\n'
        b"Content-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\n"
        b"abcde\r\n--bb-boundary--\r\n"
    )
    return body, {"Content-Type": "multipart/form-data; boundary=bb-boundary"}


REFUSED_REQUESTS = {
    "a 12,000-character file name": (
        400,
        "invalid_request",
        {"files": _file("bb-" + "l" * 11993 + ".txt", b"A long name.")},
    ),
    "1,100 form fields": (
        400,
        "invalid_request",
        {"data": {f"f{i}": "v" for i in range(1100)}, "files": _file("bb-fields.txt", b"Fields.")},
    ),
    "101 files": (
        400,
        "invalid_request",
        {"files": [("file", (f"bb-files-{i}.txt", b"File.", "text/plain")) for i in range(101)]},
    ),
    "base64 cut short": (
        400,
        "invalid_request",
        dict(zip(("content", "headers"), _base64_part_cut_short(), strict=True)),
    ),
    "a form field over 50 MiB": (
        413,
        "payload_too_large",
        {"data": {"name": "q" * (50 * 1024 * 1024 + 1)}, "files": _file("bb-big.txt", b"Big.")},
    ),
}


@covers("POST /api/projects/{project_id}/documents", "400 invalid_request", "413 payload_too_large")
@pytest.mark.parametrize("case", list(REFUSED_REQUESTS))
def test_a_request_django_refuses_for_its_size_or_shape_answers_its_json_error(
    world: World, case: str
) -> None:
    bob, project = world.api("bob"), world.project_id
    status, code, request = REFUSED_REQUESTS[case]

    refused = bob.call(UPLOAD, status, code, project_id=project, **request).json()

    assert refused["error"]
    listed = bob.call(
        "GET /api/projects/{project_id}/documents", 200, project_id=project, params={"limit": 500}
    )
    names = [d["name"] for d in listed.json()["items"]]
    assert not [n for n in names if n.startswith(("bb-lll", "bb-fields", "bb-files", "bb-b64", "bb-big"))]


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


@covers("GET /api/projects/{project_id}/documents/{document_id}/mentions", "200", "404 document_not_found")
@covers("POST /api/projects/{project_id}/graph/tools/{tool_name}", "200")
def test_an_upload_indexes_what_its_passages_mention_and_search_walks_from_a_question_to_its_bridge(
    world: World,
) -> None:
    bob = world.api("bob")
    film = b"The Quiet Harbour (1961 film): The Quiet Harbour is a drama film directed by Maren Voss."
    director = b"Maren Voss: Maren Voss was a painter and director, born in the town of Kestel."

    uploaded = bob.call(UPLOAD, 201, files=_file("bb-film.txt", film), project_id=world.project_id).json()
    bob.call(UPLOAD, 201, files=_file("bb-director.txt", director), project_id=world.project_id)

    mentions = bob.call(
        "GET /api/projects/{project_id}/documents/{document_id}/mentions",
        200,
        project_id=world.project_id,
        document_id=uploaded["document"]["id"],
    ).json()
    found = {(m["surface"], m["kind"], m["normalised"]) for m in mentions["items"]}
    assert ("The Quiet Harbour (1961 film)", "title", "quiet harbour") in found
    assert ("Maren Voss", "name", "maren voss") in found
    assert mentions["count"] == len(mentions["items"])
    results = bob.call(
        "POST /api/projects/{project_id}/graph/tools/{tool_name}",
        200,
        json={"query": "Where was the director of film The Quiet Harbour born?", "limit": 3},
        project_id=world.project_id,
        tool_name="search_passages",
    ).json()["results"]
    assert {"bb-film.txt", "bb-director.txt"} <= {r["document_name"] for r in results[:3]}
    assert ["Quiet Harbour"] in [r["mentions"] for r in results]
    bob.call(
        "GET /api/projects/{project_id}/documents/{document_id}/mentions",
        404,
        "document_not_found",
        project_id=world.project_id,
        document_id="00000000-0000-0000-0000-000000000000",
    )


@covers(
    "POST /api/projects/{project_id}/documents",
    "201",
    "413 document_too_many_sheets",
    "413 document_too_many_rows",
    "400 document_encrypted",
    "400 document_corrupt",
    "400 document_without_text",
)
def test_office_files_tables_and_scans_are_read_and_bad_ones_refused(world: World) -> None:
    """#50 item 2: each new format through the server as `make run` starts it (its OCR engine too)."""
    bob, project = world.api("bob"), world.project_id
    import openpyxl

    workbook = openpyxl.Workbook()
    for n in range(51):
        (workbook.active if n == 0 else workbook.create_sheet()).append([f"sheet {n}"])
    many_sheets = io.BytesIO()
    workbook.save(many_sheets)
    many_rows = ("Supplier,Cost\n" + "".join(f"S{n},{n}\n" for n in range(20001))).encode()
    scan = png_scanned(["Inspection of pier 4", "", "The crane lifts twelve tonnes."])
    files = {
        "bb-supplies.docx": (docx_report(), "docx"),
        "bb-deck.pptx": (pptx_deck(), "pptx"),
        "bb-costs.xlsx": (xlsx_two_sheets(), "xlsx"),
        "bb-costs.csv": (csv_suppliers(), "csv"),
        "bb-pier.png": (scan, "image"),
        "bb-pier.pdf": (pdf_of_images([scan]), "pdf"),
    }

    read = {
        name: bob.call(UPLOAD, 201, files=_file(name, data), project_id=project).json()
        for name, (data, _) in files.items()
    }
    bob.call(
        UPLOAD,
        413,
        "document_too_many_sheets",
        files=_file("y.xlsx", many_sheets.getvalue()),
        project_id=project,
    )
    bob.call(UPLOAD, 413, "document_too_many_rows", files=_file("y.csv", many_rows), project_id=project)
    bob.call(UPLOAD, 400, "document_encrypted", files=_file("y.docx", docx_encrypted()), project_id=project)
    bob.call(
        UPLOAD, 400, "document_corrupt", files=_file("y.xlsx", xlsx_two_sheets()[:2000]), project_id=project
    )
    bob.call(UPLOAD, 400, "document_without_text", files=_file("y.png", png_scanned([])), project_id=project)

    assert {name: body["document"]["format"] for name, body in read.items()} == {
        n: f for n, (_, f) in files.items()
    }
    assert all(body["document"]["passages"] >= 1 for body in read.values())
    scanned = bob.call(
        "GET /api/projects/{project_id}/documents/{document_id}/passages",
        200,
        project_id=project,
        document_id=read["bb-pier.png"]["document"]["id"],
    ).json()["items"]
    assert scanned[1]["text"] == "The crane lifts twelve tonnes." and 0.8 < scanned[1]["ocrConfidence"] <= 1
    listed = bob.call("GET /api/projects/{project_id}/documents", 200, project_id=project).json()
    assert not {"y.xlsx", "y.csv", "y.docx", "y.png"} & {d["name"] for d in listed["items"]}

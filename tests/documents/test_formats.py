"""Documents people really have (#50 item 2): Word, PowerPoint, Excel and CSV files, and scanned
pages and images read by OCR. Each file is built here; each is checked for its passages (headings
and slide titles kept with them, a table's rows with their headers, OCR's confidence recorded) and
for search; a file that cannot be read gets its own 4xx and nothing is stored."""

from __future__ import annotations

import io

import pytest

from apps.documents.models import Document, Passage
from tests.documents.documents_files import (
    csv_suppliers,
    docx_encrypted,
    docx_report,
    pdf_of_images,
    png_scanned,
    pptx_deck,
    xlsx_two_sheets,
)
from tests.graph_tools.conftest import call_tool

pytestmark = pytest.mark.django_db

SCAN = ["Inspection of pier 4", "", "The crane lifts twelve tonnes.", "It was repaired by Marta Lobo."]


def upload(client, project, name, data):
    file = io.BytesIO(data)
    file.name = name
    return client.post(f"/api/projects/{project.id}/documents", {"file": file})


def passages_of(project) -> list[Passage]:
    return list(Passage.objects.filter(project=project).order_by("ordinal"))


def test_a_docx_keeps_its_headings_with_their_passages_and_its_table_as_rows(editor):
    client, project = editor

    response = upload(client, project, "supplies.docx", docx_report())

    assert response.status_code == 201, response.json()
    assert response.json()["document"]["format"] == "docx"
    texts = [p.text for p in passages_of(project)]
    assert texts == [
        "Harbour supplies 2026",
        "Harbour supplies 2026 › Repairs\nThe crane at pier 4 was repaired by Marta Lobo in September.",
        "Harbour supplies 2026 › Supplier costs\nSupplier: Acme; Q3 cost: 1200; Q4 cost: 800",
        "Harbour supplies 2026 › Supplier costs\nSupplier: Globex; Q3 cost: 950; Q4 cost: 1300",
        "Harbour supplies 2026 › Supplier costs\nSupplier: Initech; Q3 cost: 400; Q4 cost: 420",
    ]
    document = Document.objects.get(project=project)
    assert all(document.text[p.char_start : p.char_end] == p.text for p in passages_of(project))
    assert all(p.ocr_confidence is None for p in passages_of(project))


def test_a_pptx_reads_each_slide_as_a_page_under_its_title(editor):
    client, project = editor

    response = upload(client, project, "lighthouse.pptx", pptx_deck())

    assert response.status_code == 201, response.json()
    assert response.json()["document"]["pages"] == 2
    assert [(p.page, p.text) for p in passages_of(project)] == [
        (1, "Lighthouse restoration\nThe lamp was replaced in 2025.\nThe keeper is Ana Reis."),
        (2, "Budget\nItem: Lamp; Cost: 3400"),
        (2, "Budget\nItem: Paint; Cost: 780"),
    ]


def test_an_xlsx_reads_each_sheet_by_name_and_each_row_with_its_headers(editor):
    client, project = editor

    response = upload(client, project, "suppliers.xlsx", xlsx_two_sheets())

    assert response.status_code == 201, response.json()
    assert response.json()["document"]["format"] == "xlsx"
    assert [p.text for p in passages_of(project)] == [
        "Sheet: Costs\nSupplier: Acme; Q3 cost: 1200; Q4 cost: 800",
        "Sheet: Costs\nSupplier: Globex; Q3 cost: 950; Q4 cost: 1300",
        "Sheet: Costs\nSupplier: Initech; Q3 cost: 400; Q4 cost: 420",
        "Sheet: Contacts\nSupplier: Acme; Contact: Ivo Sand; City: Porto",
        "Sheet: Contacts\nSupplier: Globex; Contact: Lena Berg; City: Oslo",
    ]


def test_a_csv_reads_each_row_with_its_headers(editor):
    client, project = editor

    response = upload(client, project, "suppliers.csv", csv_suppliers())

    assert response.status_code == 201, response.json()
    assert [p.text for p in passages_of(project)] == [
        "Supplier: Acme; Q3 cost: 1200; Q4 cost: 800",
        "Supplier: Globex; Q3 cost: 950; Q4 cost: 1300",
        "Supplier: Initech; Q3 cost: 400; Q4 cost: 420",
    ]


def test_a_scanned_image_is_read_by_ocr_with_its_confidence(editor):
    client, project = editor

    response = upload(client, project, "pier.png", png_scanned(SCAN))

    assert response.status_code == 201, response.json()
    assert response.json()["document"]["format"] == "image"
    passages = passages_of(project)
    assert [p.text for p in passages] == [
        "Inspection of pier 4",
        "The crane lifts twelve tonnes.\nIt was repaired by Marta Lobo.",
    ]
    assert all(p.page == 1 and 0.8 < p.ocr_confidence <= 1 for p in passages)


def test_a_scanned_pdf_is_read_by_ocr_page_by_page(editor):
    client, project = editor
    scan = pdf_of_images(
        [png_scanned(SCAN), png_scanned(["Second page: the tide tables", "are in the customs house."])]
    )

    response = upload(client, project, "pier.pdf", scan)

    assert response.status_code == 201, response.json()
    passages = passages_of(project)
    assert [p.page for p in passages] == [1, 1, 2]
    assert passages[1].text == "The crane lifts twelve tonnes.\nIt was repaired by Marta Lobo."
    assert passages[2].text == "Second page: the tide tables\nare in the customs house."
    assert all(0.8 < p.ocr_confidence <= 1 for p in passages)
    listed = client.get(f"/api/projects/{project.id}/documents/{passages[0].document_id}/passages").json()
    assert listed["items"][0]["ocrConfidence"] == passages[0].ocr_confidence


@pytest.mark.parametrize(
    ("name", "build"),
    [("suppliers.xlsx", xlsx_two_sheets), ("supplies.docx", docx_report), ("s.csv", csv_suppliers)],
)
def test_search_passages_finds_a_tables_rows_by_their_headers(editor, name, build):
    client, project = editor
    upload(client, project, name, build())

    found = call_tool(project, "search_passages", query="Which supplier had the highest Q3 cost?")

    texts = [r["text"] for r in found["results"]]
    assert any("Supplier: Acme; Q3 cost: 1200" in t for t in texts), texts
    assert all("Q3 cost" in t for t in texts[:3])


def test_search_passages_finds_a_scanned_pages_text_with_its_ocr_confidence(editor):
    client, project = editor
    upload(client, project, "pier.png", png_scanned(SCAN))
    upload(client, project, "notes.txt", b"The crane was bought in 1998.")

    found = call_tool(project, "search_passages", query="Who repaired the crane?")

    scanned = next(r for r in found["results"] if r["document_name"] == "pier.png")
    typed = next(r for r in found["results"] if r["document_name"] == "notes.txt")
    assert found["results"][0]["text"].startswith("The crane lifts twelve tonnes.")
    assert 0.8 < scanned["ocr_confidence"] <= 1
    assert typed["ocr_confidence"] is None


@pytest.mark.parametrize(
    ("name", "build", "status", "code"),
    [
        ("secret.docx", docx_encrypted, 400, "document_encrypted"),
        ("broken.xlsx", lambda: xlsx_two_sheets()[:2000], 400, "document_corrupt"),
        ("broken.pptx", lambda: b"not a presentation", 400, "document_corrupt"),
        ("blank.png", lambda: png_scanned([]), 400, "document_without_text"),
        ("cut.jpg", lambda: b"\xff\xd8\xff\xe0\x00\x10JFIF", 400, "document_corrupt"),
        ("blank-scan.pdf", lambda: pdf_of_images([png_scanned([])]), 400, "document_without_text"),
        (
            "old.doc",
            lambda: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600),
            415,
            "unsupported_document_type",
        ),
        ("latin1.csv", lambda: b"Name,City\nJos\xe9,S\xe3o Paulo\n", 400, "document_corrupt"),
    ],
)
def test_a_bad_file_gets_a_clear_4xx_and_nothing_is_stored(editor, name, build, status, code):
    client, project = editor

    response = upload(client, project, name, build())

    assert response.status_code == status, response.json()
    assert response.json()["code"] == code and response.json()["error"]
    assert not Document.objects.exists() and not Passage.objects.exists()


@pytest.mark.parametrize(
    ("setting", "value", "name", "build", "code"),
    [
        ("KGCHAT_DOCUMENT_MAX_SHEETS", 1, "suppliers.xlsx", xlsx_two_sheets, "document_too_many_sheets"),
        ("KGCHAT_DOCUMENT_MAX_ROWS", 4, "suppliers.xlsx", xlsx_two_sheets, "document_too_many_rows"),
        ("KGCHAT_DOCUMENT_MAX_ROWS", 2, "s.csv", csv_suppliers, "document_too_many_rows"),
        ("KGCHAT_DOCUMENT_MAX_PAGES", 1, "deck.pptx", pptx_deck, "document_too_many_pages"),
        (
            "KGCHAT_DOCUMENT_MAX_OCR_PAGES",
            1,
            "scan.pdf",
            lambda: pdf_of_images([png_scanned(SCAN), png_scanned(SCAN)]),
            "document_too_many_pages",
        ),
    ],
)
def test_sheets_rows_slides_and_ocr_pages_have_limits_with_their_codes(
    editor, settings, setting, value, name, build, code
):
    client, project = editor
    setattr(settings, setting, value)

    response = upload(client, project, name, build())

    assert response.status_code == 413, response.json()
    assert response.json()["code"] == code
    assert not Document.objects.exists()


def test_without_the_ocr_engine_an_image_gets_a_503_that_says_what_to_install(editor, monkeypatch):
    client, project = editor
    monkeypatch.setenv("PATH", "/nonexistent")

    response = upload(client, project, "pier.png", png_scanned(SCAN))

    assert response.status_code == 503
    assert response.json()["code"] == "ocr_unavailable" and "tesseract-ocr" in response.json()["error"]
    assert not Document.objects.exists()


def test_a_slides_grouped_text_and_speaker_notes_are_read_under_its_title(editor):
    import pptx
    from pptx.util import Inches

    client, project = editor
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Moorings"
    group = slide.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(2), Inches(4), Inches(1)).text_frame.text = "Berth 7 is free."
    slide.notes_slide.notes_text_frame.text = "Ask the harbour master first."
    data = io.BytesIO()
    deck.save(data)

    response = upload(client, project, "moorings.pptx", data.getvalue())

    assert response.status_code == 201, response.json()
    assert [p.text for p in passages_of(project)] == [
        "Moorings\nBerth 7 is free.",
        "Moorings\nNotes: Ask the harbour master first.",
    ]

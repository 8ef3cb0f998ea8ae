"""Documents people really have in answers (#50 item 2): a plain turn over a Word table, a
presentation, a workbook, a CSV file and a scanned page retrieves the passage that answers the
question, and the scripted model's answer cites it."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from apps.agents.llm.scripted import text
from apps.chat.models import Message
from apps.documents.models import Passage
from apps.documents.services import document_upload
from tests.chat.conftest import sse_turn
from tests.documents.documents_files import (
    csv_suppliers,
    docx_report,
    pdf_of_images,
    png_scanned,
    pptx_deck,
    xlsx_two_sheets,
)

pytestmark = pytest.mark.django_db(transaction=True)

SCAN = ["Inspection of pier 4", "", "The crane lifts twelve tonnes.", "It was repaired by Marta Lobo."]
CASES = [
    (
        "suppliers.xlsx",
        xlsx_two_sheets,
        "Which supplier had the highest Q3 cost?",
        "Sheet: Costs\nSupplier: Acme",
    ),
    (
        "supplies.docx",
        docx_report,
        "Which supplier had the highest Q3 cost?",
        "Harbour supplies 2026 › Supplier costs\nSupplier: Acme",
    ),
    ("suppliers.csv", csv_suppliers, "Which supplier had the highest Q3 cost?", "Supplier: Acme"),
    ("lighthouse.pptx", pptx_deck, "Who is the keeper of the lighthouse?", "Lighthouse restoration\n"),
    ("pier.png", lambda: png_scanned(SCAN), "Who repaired the crane at pier 4?", "The crane lifts"),
    (
        "pier.pdf",
        lambda: pdf_of_images([png_scanned(SCAN)]),
        "Who repaired the crane at pier 4?",
        "The crane lifts",
    ),
]


@pytest.mark.parametrize(("name", "build", "question", "starts"), CASES, ids=[c[0] for c in CASES])
async def test_a_plain_answer_cites_the_passage_of_each_format(
    world, scripted, name, build, question, starts
):
    project = world["project"]
    await sync_to_async(document_upload)(project=project, name=name, data=build())
    passage = await Passage.objects.aget(project=project, text__startswith=starts)
    scripted.turns.append(text(f"It is in [{name}](passage:{passage.id})."))

    status, frames = await sse_turn(world["client"], {"message": question, "projectId": str(project.id)})

    assert status == 200
    system = scripted.calls[0].messages[0].content
    assert f"[{name}](passage:{passage.id})" in system
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert answer.content == f"It is in [{name}](passage:{passage.id})."
    assert [(c["kind"], c["id"]) for c in answer.citations] == [("passage", str(passage.id))]

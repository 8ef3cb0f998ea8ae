"""Documents on the page (issue 26): an answer citing an entity and a passage shows the passage's
document and a snippet among its sources."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from apps.documents.models import Passage
from apps.documents.services import document_upload
from tests.chat.browser.helpers import World, log_in
from tests.llm_server import LLMTestServer, Stream, text_chunks, tool_call_chunks

pytestmark = pytest.mark.browser

GUIDE = (
    "# Paris guide\n\n"
    "The Eiffel Tower in Paris was finished in 1889 for the World's Fair.\n\n"
    "The Louvre is the most visited museum in the world.\n"
)


def test_an_answer_citing_an_entity_and_a_passage_shows_the_document_and_a_snippet(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    document_upload(project=world.project, name="paris-guide.md", data=GUIDE.encode())
    tower = Passage.objects.get(project=world.project, text__startswith="The Eiffel Tower")
    world.agent.tools = [*world.agent.tools, "search_passages"]
    world.agent.save()
    paris = world.e["paris"]
    llm_server.enqueue(
        Stream(tool_call_chunks("get_entity_edges", {"entity_id": "paris"}), finish_reason="tool_calls"),
        Stream(
            tool_call_chunks("search_passages", {"query": "Eiffel Tower finished"}, call_id="call_2"),
            finish_reason="tool_calls",
        ),
        Stream(
            text_chunks(
                f"[Paris](entity:{paris.id}) got its tower in 1889 ",
                f"([paris-guide.md](passage:{tower.id})).",
            )
        ),
    )
    log_in(page, live_server_url, "ada")

    box = page.get_by_role("textbox", name="Message")
    box.fill("When was the Eiffel Tower finished?")
    box.press("Enter")

    turn = page.locator("article.message-assistant").last
    expect(turn).to_have_attribute("data-state", "done")
    expect(turn.locator(f'.md a.entity-link[data-entity-id="{paris.id}"]')).to_have_text("Paris")
    link = turn.locator(f'.md a.passage-link[data-passage-id="{tower.id}"]')
    expect(link).to_have_text("paris-guide.md")
    expect(link).to_have_attribute("title", "paris-guide.md: " + tower.text)
    source = turn.locator(".citations .passage-citation")
    expect(source.locator(".passage-document")).to_have_text("paris-guide.md")
    expect(source.locator(".passage-snippet")).to_have_text(tower.text)
    expect(turn.locator(".citations a.entity-link.citation")).to_have_text("Paris")

    link.click()
    expect(source).to_have_class("citation passage-citation highlight")

    page.reload()
    again = page.locator("article.message-assistant").last
    expect(again.locator(".citations .passage-citation .passage-document")).to_have_text("paris-guide.md")


# Upload, extraction progress, review (issue 26 "Done means"): a Markdown file and a PDF.
P1 = "Freedonia is a country whose capital is Fredville. Its currency is the Freedonian crown."
P2 = "Nortown lies in Freedonia, north of the capital."
P3 = "Nortown uses the Freedonian crown as well."
TRUTH = {
    P1: {
        "entities": [
            {"name": "Freedonia", "type": "Country", "description": "A country."},
            {"name": "Fredville", "type": "City", "description": "The capital of Freedonia."},
            {"name": "Freedonian crown", "type": "Currency", "description": "Freedonia's currency."},
        ],
        "relationships": [
            {"source": "Fredville", "type": "CAPITAL_OF", "target": "Freedonia"},
            {"source": "Freedonia", "type": "USES_CURRENCY", "target": "Freedonian crown"},
        ],
    },
    P2: {
        "entities": [
            {"name": "Nortown", "type": "City", "description": "A town in the north."},
            {"name": "Freedonia", "type": "Country", "description": "A country."},
        ],
        "relationships": [{"source": "Nortown", "type": "LOCATED_IN", "target": "Freedonia"}],
    },
    P3: {
        "entities": [
            {"name": "Nortown", "type": "City", "description": "A town."},
            {"name": "Freedonian crown", "type": "Currency", "description": "A currency."},
        ],
        "relationships": [{"source": "Nortown", "type": "USES_CURRENCY", "target": "Freedonian crown"}],
    },
}


def perfect_extractor():  # type: ignore[no-untyped-def]
    import re

    from apps.agents.llm.base import ToolCall
    from apps.agents.llm.scripted import ScriptedProvider
    from apps.documents.extraction.spec import TOOL_NAME

    def respond(messages, tools):  # type: ignore[no-untyped-def]
        text = re.search(r"Passage:\n(.*)$", messages[-1].content, re.DOTALL).group(1)
        nothing = {"entities": [], "relationships": []}
        return [ToolCall(id="x", name=TOOL_NAME, arguments=TRUTH.get(" ".join(text.split()), nothing))]

    return ScriptedProvider(responder=respond)


def item(page: Page, text: str):  # type: ignore[no-untyped-def]
    return page.locator("#change-set-items .change-item").filter(has_text=text)


def test_upload_a_pdf_and_markdown_watch_the_progress_review_the_change_set_and_cite_both(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer, tmp_path
) -> None:
    from apps.documents.extraction.step import extraction_run_until_idle
    from apps.graph_tools.models import GraphChange, GraphObject, GraphRelationship
    from tests.documents.documents_files import pdf_with_pages

    (tmp_path / "freedonia.md").write_text(f"# Freedonia\n\n{P1}\n\n{P2}\n")
    (tmp_path / "nortown.pdf").write_bytes(pdf_with_pages([[P3]]))
    log_in(page, live_server_url, "ada")

    page.get_by_role("button", name="Documents").click()
    dialog = page.locator("#documents-dialog")
    for name in ("freedonia.md", "nortown.pdf"):
        dialog.locator("#document-file").set_input_files(str(tmp_path / name))
        dialog.get_by_role("button", name="Upload").click()
        expect(dialog.locator("#documents-status")).to_contain_text(f"{name}: ")
    expect(dialog.locator(".document-row")).to_have_count(2)
    expect(dialog.locator(".document-row", has_text="nortown.pdf")).to_contain_text(
        "pdf, 1 pages, 1 passages"
    )

    dialog.locator(".document-row", has_text="freedonia.md").get_by_role("button", name="Extract").click()
    progress = dialog.locator("#extraction-progress")
    expect(progress).to_have_attribute("data-status", "running")
    expect(progress).to_contain_text("0 of 3 passages read")
    extraction_run_until_idle(provider=perfect_extractor())
    expect(progress).to_have_attribute("data-status", "review")
    expect(progress).to_contain_text("3 of 3 passages read")

    # Approve some, reject one, edit one.
    item(page, "Fredville -CAPITAL_OF->").locator(".item-select").check()
    item(page, "Nortown -LOCATED_IN->").locator(".item-select").check()
    fredville = page.locator('.change-item[data-action="create_entity"]').filter(
        has=page.locator('.item-name[value="Fredville"]')
    )
    nortown = page.locator('.change-item[data-action="create_entity"]').filter(
        has=page.locator('.item-name[value="Nortown"]')
    )
    fredville.locator(".item-select").check()
    nortown.locator(".item-select").check()
    nortown.locator(".item-name").fill("Nortown-on-Fred")
    dialog.get_by_role("button", name="Approve selected").click()
    expect(item(page, "Nortown-on-Fred (City)").locator(".item-status")).to_have_text("applied")
    crown = page.locator('.change-item[data-action="create_entity"]').filter(
        has=page.locator('.item-name[value="Freedonian crown"]')
    )
    crown.locator(".item-select").check()
    dialog.get_by_role("button", name="Reject selected").click()
    expect(item(page, "Freedonian crown (Currency)").locator(".item-status")).to_have_text("rejected")
    expect(item(page, "Freedonia -USES_CURRENCY->").locator(".item-status")).to_have_text("pending")
    dialog.get_by_role("button", name="Approve all").click()
    expect(progress).to_have_attribute("data-status", "applied")
    expect(item(page, "Freedonia -USES_CURRENCY->").locator(".item-status")).to_have_text("failed")

    edges = {
        (r.src.name, r.type, r.dst.name)
        for r in GraphRelationship.objects.filter(project=world.project).select_related("src", "dst")
    }
    assert {("Fredville", "CAPITAL_OF", "Freedonia"), ("Nortown-on-Fred", "LOCATED_IN", "Freedonia")} <= edges
    assert not GraphObject.objects.filter(project=world.project, name="Freedonian crown").exists()
    assert (
        GraphChange.objects.filter(project=world.project, authority="extraction")
        .exclude(passage_id=None)
        .count()
        == 5  # Fredville, Nortown; then Freedonia and the two relationships that waited for it
    )

    # The PDF's extraction: its one passage.
    dialog.locator(".document-row", has_text="nortown.pdf").get_by_role("button", name="Extract").click()
    expect(progress).to_contain_text("nortown.pdf: 0 of 1 passages read")
    extraction_run_until_idle(provider=perfect_extractor())
    expect(progress).to_have_attribute("data-status", "review")
    expect(progress).to_contain_text("nortown.pdf: 1 of 1 passages read")
    dialog.get_by_role("button", name="Close").click()

    # A question whose answer cites an entity and a passage.
    fred = GraphObject.objects.get(project=world.project, name="Fredville")
    tower = Passage.objects.get(project=world.project, text=P1)
    world.agent.tools = [*world.agent.tools, "search_passages"]
    world.agent.save()
    llm_server.enqueue(
        Stream(tool_call_chunks("get_entity_edges", {"entity_id": str(fred.id)}), finish_reason="tool_calls"),
        Stream(
            tool_call_chunks("search_passages", {"query": "capital of Freedonia"}, call_id="call_2"),
            finish_reason="tool_calls",
        ),
        Stream(
            text_chunks(f"The capital is [Fredville](entity:{fred.id}) ([freedonia.md](passage:{tower.id})).")
        ),
    )
    box = page.get_by_role("textbox", name="Message")
    box.fill("What is the capital of Freedonia?")
    box.press("Enter")
    turn = page.locator("article.message-assistant").last
    expect(turn).to_have_attribute("data-state", "done")
    expect(turn.locator(f'.md a.entity-link[data-entity-id="{fred.id}"]')).to_have_text("Fredville")
    expect(turn.locator(".citations .passage-citation .passage-document")).to_have_text("freedonia.md")
    expect(turn.locator(".citations .passage-snippet")).to_have_text(P1)


def test_the_documents_dialog_uploads_word_powerpoint_excel_csv_and_a_scan(
    page: Page, live_server_url: str, world: World, tmp_path
) -> None:
    from tests.documents.documents_files import (
        csv_suppliers,
        docx_report,
        png_scanned,
        pptx_deck,
        xlsx_two_sheets,
    )

    files = {
        "supplies.docx": (docx_report(), "docx, 5 passages"),
        "lighthouse.pptx": (pptx_deck(), "pptx, 2 slides, 3 passages"),
        "suppliers.xlsx": (xlsx_two_sheets(), "xlsx, 2 sheets, 5 passages"),
        "suppliers.csv": (csv_suppliers(), "csv, 3 passages"),
        "pier.png": (
            png_scanned(["Inspection of pier 4", "", "The crane lifts twelve tonnes."]),
            "image, 1 pages",
        ),
    }
    for name, (data, _) in files.items():
        (tmp_path / name).write_bytes(data)
    log_in(page, live_server_url, "ada")

    page.get_by_role("button", name="Documents").click()
    dialog = page.locator("#documents-dialog")
    accept = dialog.locator("#document-file").get_attribute("accept") or ""
    for name in files:
        dialog.locator("#document-file").set_input_files(str(tmp_path / name))
        dialog.get_by_role("button", name="Upload").click()
        expect(dialog.locator("#documents-status")).to_contain_text(f"{name}: ")

    assert {".docx", ".pptx", ".xlsx", ".csv", ".png", ".jpg"} <= set(accept.split(","))
    expect(dialog.locator(".document-row")).to_have_count(len(files))
    for name, (_, shown) in files.items():
        expect(dialog.locator(".document-row", has_text=name)).to_contain_text(shown)

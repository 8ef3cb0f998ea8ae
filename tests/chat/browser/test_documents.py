"""Documents on the page (issue 26): an answer citing an entity and a passage shows the passage's
document and a snippet among its sources."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from apps.graph_tools.documents.services import document_upload
from apps.graph_tools.models import Passage
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

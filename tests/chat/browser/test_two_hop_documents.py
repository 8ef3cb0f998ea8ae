"""A two-hop answer from two documents on the page (issue #48, "Done means"): two short documents
uploaded through the Documents dialog, a question whose answer needs both, and the answer citing a
passage of each, shown among its sources.

The model is the scripted test server speaking native tool calls (the browser tests' model): it
searches the passages with the question, then again with the name the first passage gave, as the
agent's instructions ask. The small-model loop's own reading of the same two hops is proved in
``tests/agents/loop/test_reading.py`` and, through whole turns, in
``tests/chat/turns/test_small_model_passages.py``.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from apps.agents.models import AgentRunToolCall
from apps.documents.models import Passage
from tests.chat.browser.helpers import World, log_in
from tests.llm_server import LLMTestServer, Stream, text_chunks, tool_call_chunks

pytestmark = pytest.mark.browser

FILM = "Night Shift is a 1999 drama film written and directed by Vera Lind."
DIRECTOR = "Vera Lind (born 4 May 1950 in Tartu) is an Estonian film director."
QUESTION = "Where was the director of the film Night Shift born?"


def test_a_two_hop_question_over_two_uploaded_documents_is_answered_citing_a_passage_of_each(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer, tmp_path
) -> None:
    (tmp_path / "night-shift.md").write_text(f"# Night Shift\n\n{FILM}\n")
    (tmp_path / "vera-lind.txt").write_text(f"Vera Lind: {DIRECTOR}\n")
    world.agent.tools = [*world.agent.tools, "search_passages"]
    world.agent.save()
    log_in(page, live_server_url, "ada")
    page.get_by_role("button", name="Documents").click()
    dialog = page.locator("#documents-dialog")
    for name in ("night-shift.md", "vera-lind.txt"):
        dialog.locator("#document-file").set_input_files(str(tmp_path / name))
        dialog.get_by_role("button", name="Upload").click()
        expect(dialog.locator("#documents-status")).to_contain_text(f"{name}: ")
    expect(dialog.locator(".document-row")).to_have_count(2)
    dialog.get_by_role("button", name="Close").click()
    film = Passage.objects.get(project=world.project, text__contains="directed by Vera Lind")
    director = Passage.objects.get(project=world.project, text__contains="born 4 May 1950")
    llm_server.enqueue(
        Stream(tool_call_chunks("search_passages", {"query": QUESTION}), finish_reason="tool_calls"),
        Stream(
            tool_call_chunks("search_passages", {"query": "Where was Vera Lind born?"}, call_id="call_2"),
            finish_reason="tool_calls",
        ),
        Stream(
            text_chunks(
                "Tartu: the film was directed by Vera Lind ",
                f"([night-shift.md](passage:{film.id})), who was born in Tartu ",
                f"([vera-lind.txt](passage:{director.id})).",
            )
        ),
    )

    box = page.get_by_role("textbox", name="Message")
    box.fill(QUESTION)
    box.press("Enter")

    turn = page.locator("article.message-assistant").last
    expect(turn).to_have_attribute("data-state", "done")
    expect(turn.locator(f'.md a.passage-link[data-passage-id="{film.id}"]')).to_have_text("night-shift.md")
    expect(turn.locator(f'.md a.passage-link[data-passage-id="{director.id}"]')).to_have_text("vera-lind.txt")
    sources = turn.locator(".citations .passage-citation .passage-document")
    expect(sources).to_have_text(["night-shift.md", "vera-lind.txt"])
    # Both searches ran on the server, the second with the name the first passage gave.
    searched = AgentRunToolCall.objects.filter(run__project=world.project, tool_name="search_passages")
    assert [c.input["query"] for c in searched.order_by("created_at")] == [
        QUESTION,
        "Where was Vera Lind born?",
    ]
    page.reload()
    expect(
        page.locator("article.message-assistant").last.locator(".citations .passage-citation")
    ).to_have_count(2)

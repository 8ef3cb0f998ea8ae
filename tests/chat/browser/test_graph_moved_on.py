"""The page when the graph moves on (issue 15 follow-up): an answer whose entity changed since says
so after a reload and can ask again; a decision in one tab shows in the other tab at once; the
chip of a write waiting for approval says so and then shows the outcome."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from apps.agents.models import AgentDefinition
from apps.graph_tools.importer import graph_import
from apps.graph_tools.models import ChangeAuthority
from apps.graph_tools.registry import WriteAuthorization
from apps.graph_tools.write_plans import UpdateEntityArgs
from apps.graph_tools.writes import write_apply
from tests.chat.browser.helpers import World, log_in, screenshot
from tests.llm_server import LLMTestServer, Stream, text_chunks, tool_call_chunks

pytestmark = pytest.mark.browser

QUESTION = "Where is Paris?"
RENAME = {"entity_id": "paris", "name": "Paris, France"}


def ask(page: Page, question: str) -> None:
    box = page.get_by_role("textbox", name="Message")
    box.fill(question)
    box.press("Enter")


def answer_about_paris(page: Page, live_server_url: str, llm_server: LLMTestServer) -> None:
    llm_server.enqueue(
        Stream(
            tool_call_chunks("get_entity_edges", {"entity_id": "paris"}, call_id="r1"),
            finish_reason="tool_calls",
        ),
        Stream(text_chunks("Paris is the capital of France.")),
    )
    log_in(page, live_server_url, "ada")
    ask(page, QUESTION)
    answer = page.locator("article.message-assistant").last
    expect(answer.locator(".md")).to_have_text("Paris is the capital of France.")
    expect(answer).to_have_attribute("data-state", "done")
    expect(page).to_have_url(re.compile(r"/chat/[0-9a-f-]{36}/$"))


def ask_again_sends_the_question_once_more(page: Page, llm_server: LLMTestServer) -> None:
    note = page.locator(".graph-changed")
    llm_server.enqueue(Stream(text_chunks("Paris is still the capital of France.")))

    note.get_by_role("button", name="Ask again").click()

    expect(page.locator("article.message-user")).to_have_count(2)
    expect(page.locator("article.message-user").last).to_contain_text(QUESTION)
    expect(page.locator("article.message-assistant").last.locator(".md")).to_have_text(
        "Paris is still the capital of France."
    )


def test_answer_whose_entity_was_renamed_by_the_write_service_says_so_after_reload_and_asks_again(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    answer_about_paris(page, live_server_url, llm_server)
    write_apply(
        project_id=world.project.id,
        tool_name="update_entity",
        args=UpdateEntityArgs.model_validate(RENAME),
        authorization=WriteAuthorization(via=ChangeAuthority.DIRECT, user_id=world.user.id),
    )

    page.reload()

    note = page.locator(".graph-changed")
    expect(note).to_have_count(1)
    expect(note).to_contain_text("Graph changed since this answer")
    expect(note.locator("li")).to_have_text(re.compile(r"update entity: Paris, France \(version 1\)"))
    ask_again_sends_the_question_once_more(page, llm_server)


def test_answer_whose_entity_an_import_changed_says_so_but_not_for_an_unrelated_import(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    answer_about_paris(page, live_server_url, llm_server)
    unrelated = {"kind": "entity", "key": "rome", "type": "City", "name": "Rome"}
    graph_import(project=world.project, lines=[json.dumps(unrelated)])

    page.reload()
    expect(page.locator("article.message-assistant .md")).to_have_text("Paris is the capital of France.")
    expect(page.locator(".graph-changed")).to_have_count(0)
    moved = {"kind": "entity", "key": "paris", "type": "City", "name": "Paris", "description": "Moved"}
    graph_import(project=world.project, lines=[json.dumps(moved)])
    page.reload()

    note = page.locator(".graph-changed")
    expect(note.locator("li")).to_have_text(re.compile(r"Paris \(version 2\)"))
    ask_again_sends_the_question_once_more(page, llm_server)


def propose_rename_in_two_tabs(page: Page, live_server_url: str, world: World, llm_server: LLMTestServer):  # type: ignore[no-untyped-def]
    AgentDefinition.objects.filter(id=world.agent.id).update(tools=[*world.agent.tools, "update_entity"])
    llm_server.enqueue(
        Stream(tool_call_chunks("update_entity", RENAME, call_id="w1"), finish_reason="tool_calls"),
    )
    log_in(page, live_server_url, "ada")
    ask(page, "Rename Paris to Paris, France")
    expect(page.locator(".approval-card")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/chat/[0-9a-f-]{36}/$"))
    other = page.context.new_page()
    other.goto(page.url)
    expect(other.locator("body[data-ready='true']")).to_be_attached()
    # Ready and connected: the tab has sent its chat.subscribe, which makes its socket watch.
    expect(other.locator("#connection-status")).to_have_attribute("data-state", "open")
    return other


def test_approving_in_one_tab_updates_the_card_and_chip_in_the_other_tab_which_shows_the_continuation(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    other = propose_rename_in_two_tabs(page, live_server_url, world, llm_server)
    theirs = other.locator(".approval-card")
    their_chip = other.locator(".tool-chip[data-call-id='w1']").first
    expect(theirs.get_by_role("button", name="Approve")).to_be_visible()
    expect(their_chip).to_have_attribute("data-status", "awaiting")
    expect(their_chip).to_contain_text("awaiting approval")
    llm_server.enqueue(Stream(text_chunks("Renamed it to Paris, France.")))

    page.locator(".approval-card").get_by_role("button", name="Approve").click()

    expect(theirs).to_have_attribute("data-status", "approved")
    expect(theirs.locator(".approval-status")).to_have_text("Approved by ada.")
    expect(theirs.get_by_role("button")).to_have_count(0)
    expect(their_chip).to_have_attribute("data-status", "completed")
    expect(other.locator("article.message-assistant").last.locator(".md")).to_have_text(
        "Renamed it to Paris, France."
    )
    expect(page.locator(".tool-chip[data-call-id='w1']").first).to_have_attribute("data-status", "completed")
    theirs.scroll_into_view_if_needed()
    screenshot(other, "approval-card-decided-elsewhere-desktop.png")


def test_rejecting_in_one_tab_shows_who_and_why_in_the_other_and_the_chip_is_declined(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    other = propose_rename_in_two_tabs(page, live_server_url, world, llm_server)
    llm_server.enqueue(Stream(text_chunks("Understood, I left it.")))
    card = page.locator(".approval-card")

    card.get_by_label("Reason").fill("keep the short name")
    card.get_by_role("button", name="Reject").click()

    theirs = other.locator(".approval-card")
    expect(theirs).to_have_attribute("data-status", "rejected")
    expect(theirs.locator(".approval-status")).to_have_text("Rejected by ada: keep the short name")
    for tab in (page, other):
        expect(tab.locator("article.message-assistant").last.locator(".md")).to_have_text(
            "Understood, I left it."
        )
        # The paused answer's chip and the continuation's chip of the same call.
        chips = tab.locator(".tool-chip[data-call-id='w1']")
        expect(chips).to_have_count(2)
        for chip in chips.all():
            expect(chip).to_have_attribute("data-status", "declined")
            expect(chip).to_contain_text("declined")
    other.reload()
    expect(other.locator(".tool-chip[data-call-id='w1']").first).to_have_attribute("data-status", "declined")

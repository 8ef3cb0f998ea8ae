"""The approval card in the browser (issue 15 part B): a proposed graph change shows its diff with
Approve / Reject; the decision continues the answer in place."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from apps.agents.models import AgentDefinition
from apps.graph_tools.models import GraphChange, GraphObject
from tests.chat.browser.helpers import World, log_in, screenshot
from tests.factories import add_member, make_user
from tests.llm_server import LLMTestServer, Stream, text_chunks, tool_call_chunks

pytestmark = pytest.mark.browser

RENAME = {"entity_id": "paris", "name": "Paris, France"}


def curator(world: World) -> None:
    AgentDefinition.objects.filter(id=world.agent.id).update(tools=[*world.agent.tools, "update_entity"])


def propose_rename(page: Page, live_server_url: str, llm_server: LLMTestServer, after: str):  # type: ignore[no-untyped-def]
    llm_server.enqueue(
        Stream(tool_call_chunks("update_entity", RENAME, call_id="w1"), finish_reason="tool_calls"),
        Stream(text_chunks(after)),
    )
    log_in(page, live_server_url, "ada")
    box = page.get_by_role("textbox", name="Message")
    box.fill("Rename Paris to Paris, France")
    box.press("Enter")
    card = page.locator(".approval-card")
    expect(card).to_be_visible()
    return card


def test_approve_on_the_card_writes_the_change_and_the_answer_continues(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    curator(world)
    card = propose_rename(page, live_server_url, llm_server, "Renamed it to Paris, France.")
    expect(card.locator(".approval-title")).to_have_text("Proposed change: update_entity")
    expect(card.locator(".approval-after")).to_have_text("Paris, France")
    screenshot(page, "approval-card-desktop.png")

    card.get_by_role("button", name="Approve").click()

    expect(card).to_have_attribute("data-status", "approved")
    expect(page.locator("article.message-assistant").last.locator(".md")).to_have_text(
        "Renamed it to Paris, France."
    )
    assert GraphObject.objects.get(id=world.e["paris"].id).name == "Paris, France"
    assert GraphChange.objects.get(action="update_entity").user_id == world.user.id


def test_reject_on_the_card_with_a_reason_writes_nothing(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    curator(world)
    card = propose_rename(page, live_server_url, llm_server, "Understood, I left Paris as it was.")

    card.get_by_label("Reason").fill("keep the short name")
    card.get_by_role("button", name="Reject").click()

    expect(card).to_have_attribute("data-status", "rejected")
    expect(card.locator(".approval-status")).to_contain_text("keep the short name")
    expect(page.locator("article.message-assistant").last.locator(".md")).to_have_text(
        "Understood, I left Paris as it was."
    )
    assert GraphObject.objects.get(id=world.e["paris"].id).name == "Paris"
    assert not GraphChange.objects.exists()


def test_the_card_is_shown_again_after_a_reload_and_a_viewer_gets_no_buttons(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    curator(world)
    propose_rename(page, live_server_url, llm_server, "Renamed.")

    page.reload()

    card = page.locator(".approval-card")
    expect(card).to_be_visible()
    expect(card.locator(".approval-after")).to_have_text("Paris, France")
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    viewer = make_user("val")
    add_member(world.project, viewer, "viewer")
    other = page.context.browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
    with llm_server._lock:
        llm_server.plans.clear()  # ada's continuation was never asked for
    llm_server.enqueue(
        Stream(tool_call_chunks("update_entity", RENAME, call_id="w2"), finish_reason="tool_calls"),
    )
    log_in(other, live_server_url, "val")
    box = other.get_by_role("textbox", name="Message")
    box.fill("Rename Paris")
    box.press("Enter")
    theirs = other.locator(".approval-card")
    expect(theirs.locator(".approval-note")).to_contain_text("Only an editor or owner")
    expect(theirs.get_by_role("button")).to_have_count(0)
    other.context.close()

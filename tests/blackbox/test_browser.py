"""The chat page's main flows in Debian's chromium (Playwright): log in, ask an agent, see its
tool chip and its streamed tokens, and find the answer stored after a reload."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.blackbox.clients import PASSWORD
from tests.blackbox.covers import covers
from tests.blackbox.model import ScriptedModel
from tests.blackbox.world import World

CHROMIUM = "/usr/bin/chromium"  # as tests/chat/browser/helpers.py
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.browser


@pytest.fixture
def page() -> Iterator[Page]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run scripts/system_deps.sh (make test does)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        page = context.new_page()
        page.set_default_timeout(30_000)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield page
        browser.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def ask(page: Page, text: str) -> None:
    box = page.get_by_role("textbox", name="Message")
    box.fill(text)
    box.press("Enter")


@covers("PAGE /chat/", "log in", "ask", "tool chip", "tokens", "reload")
def test_a_user_logs_in_asks_an_agent_and_finds_the_answer_after_a_reload(
    page: Page, world: World, model: ScriptedModel
) -> None:
    page.goto(f"{world.url}/chat/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.get_by_label("Username").fill("cy")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/chat/$"))
    expect(page.locator("body[data-ready='true']")).to_be_attached()
    # Changing the project reloads its agents and redraws the picker: choose once it is redrawn
    # (a message sent meanwhile starts a plain conversation, whatever the picker showed).
    with (
        page.expect_response(re.compile(r"/agent-definitions")),
        page.expect_response(re.compile(r"/api/chat/conversations")),
    ):
        page.get_by_label("Project", exact=True).select_option(label="Atlas")
    page.get_by_role("radio", name=re.compile("graph-query-agent")).check()
    expect(page.get_by_role("radio", name=re.compile("graph-query-agent"))).to_be_checked()

    ask(page, '#tool get_entity_edges {"entity_id": "charles-babbage"}\nWhat did Babbage design?')

    answer = page.locator("article.message-assistant").last
    expect(answer).to_have_attribute("data-state", "done")
    chip = answer.locator(".tool-chip")
    expect(chip).to_have_attribute("data-status", "completed")
    expect(chip.locator(".tool-name")).to_have_text("get_entity_edges")
    expect(answer.locator(".md")).to_have_text("Found Charles Babbage.")
    expect(page).to_have_url(re.compile(r"/chat/[0-9a-f-]{36}/$"))
    conversation_url = page.url

    ask(page, "#hold browser\nAnd then?")
    streaming = page.locator("article.message-assistant").last
    expect(streaming.locator(".md")).to_have_text("Part one.")
    expect(streaming).to_have_attribute("data-state", "streaming")
    model.release("browser")
    expect(streaming).to_have_attribute("data-state", "done")
    expect(streaming.locator(".md")).to_have_text("Part one. Part two.")

    page.reload()

    expect(page).to_have_url(conversation_url)
    answers = page.locator("article.message-assistant")
    expect(answers).to_have_count(2)
    expect(answers.first.locator(".tool-chip .tool-name")).to_have_text("get_entity_edges")
    expect(answers.first.locator(".md")).to_have_text("Found Charles Babbage.")
    expect(answers.last.locator(".md")).to_have_text("Part one. Part two.")

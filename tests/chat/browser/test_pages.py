"""Pages without a model: login and logout, the layout at desktop and phone width, access rules."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from apps.chat.models import Conversation
from tests.chat.browser.helpers import World, log_in, screenshot
from tests.factories import make_user

pytestmark = pytest.mark.browser


def test_root_redirects_to_login_then_chat(page: Page, live_server_url: str, world: World) -> None:
    page.goto(live_server_url + "/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/chat/"))
    screenshot(page, "login-desktop.png")

    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("wrong password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("didn't match")

    page.get_by_label("Password").fill("pw-for-tests-1")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/chat/$"))
    page.goto(live_server_url + "/")
    expect(page).to_have_url(re.compile(r"/chat/$"))


def test_new_chat_page_lists_projects_and_agents(page: Page, live_server_url: str, world: World) -> None:
    log_in(page, live_server_url, "ada")

    expect(page.get_by_label("Project")).to_have_value(str(world.project.id))
    picker = page.get_by_role("radiogroup", name="Who should answer?")
    expect(picker.get_by_role("radio", name=re.compile("graph-query-agent"))).to_be_checked()
    expect(picker.get_by_role("radio", name=re.compile("Plain chat"))).not_to_be_checked()
    expect(page.locator("#connection-status")).to_have_attribute("data-state", "open")
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.goto(live_server_url + "/chat/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/chat/"))


def test_narrow_layout_hides_the_sidebar_behind_a_button(
    page: Page, live_server_url: str, world: World
) -> None:
    page.set_viewport_size({"width": 360, "height": 740})
    log_in(page, live_server_url, "ada")

    sidebar_link = page.get_by_role("link", name="+ New chat")
    expect(sidebar_link).not_to_be_in_viewport()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360
    screenshot(page, "new-chat-narrow.png")

    toggle = page.get_by_role("button", name="Show conversations")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(sidebar_link).to_be_in_viewport()
    page.keyboard.press("Escape")
    expect(toggle).to_have_attribute("aria-expanded", "false")


def test_someone_elses_conversation_answers_404(page: Page, live_server_url: str, world: World) -> None:
    mallory = make_user("mallory")
    theirs = Conversation.objects.create(project=world.project, user=mallory, title="private")

    log_in(page, live_server_url, "ada")
    response = page.goto(f"{live_server_url}/chat/{theirs.id}/")

    assert response is not None and response.status == 404


def test_pages_require_login(live_server_url: str, world: World) -> None:
    conversation = Conversation.objects.create(project=world.project, user=world.user, title="mine")
    client = Client()

    assert client.get("/chat/").status_code == 302
    assert client.get(f"/chat/{conversation.id}/").status_code == 302
    client.force_login(world.user)
    assert client.get(f"/chat/{conversation.id}/").status_code == 200
    assert client.get("/chat/not-a-uuid/").status_code == 404

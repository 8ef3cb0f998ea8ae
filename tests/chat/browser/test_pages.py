"""Pages without a model: login and logout, the layout at desktop and phone width, access rules."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from apps.agents.models import AgentDefinition
from apps.chat.models import Conversation
from tests.chat.browser.helpers import World, log_in, screenshot
from tests.factories import make_conversation, make_user

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


def test_the_picker_shows_a_disabled_agent_greyed_out_with_its_reason_and_never_chooses_it(
    page: Page, live_server_url: str, world: World
) -> None:
    AgentDefinition.objects.filter(id=world.agent.id).update(disabled_reason="its model was retired")
    AgentDefinition.objects.create(
        project=world.project, name="backup-agent", model=world.agent.model, tools=[]
    )

    log_in(page, live_server_url, "ada")

    picker = page.get_by_role("radiogroup", name="Who should answer?")
    disabled = picker.get_by_role("radio", name=re.compile("graph-query-agent"))
    expect(disabled).to_be_disabled()
    expect(disabled).not_to_be_checked()
    expect(disabled).to_have_accessible_description("Disabled: its model was retired")
    expect(picker.locator("label.agent-option.disabled")).to_have_text(
        re.compile("Disabled: its model was retired")
    )
    expect(picker.get_by_role("radio", name=re.compile("backup-agent"))).to_be_checked()
    expect(picker.get_by_role("radio", name=re.compile("Plain chat"))).to_be_enabled()


def test_a_conversation_whose_agent_is_disabled_says_so_instead_of_offering_to_send(
    page: Page, live_server_url: str, world: World
) -> None:
    conversation = make_conversation(
        world.user,
        world.project,
        "Old talk",
        [("user", "Hi"), ("assistant", "Hello.")],
        agent_definition=world.agent,
    )
    AgentDefinition.objects.filter(id=world.agent.id).update(disabled_reason="its model was retired")
    log_in(page, live_server_url, "ada")

    page.goto(f"{live_server_url}/chat/{conversation.id}/")

    notice = page.get_by_role("status").filter(has_text="is disabled")
    expect(notice).to_have_text(
        "This conversation's agent graph-query-agent is disabled: its model was retired. Start a new chat to go on."
    )
    expect(page.get_by_role("textbox", name="Message")).to_be_disabled()
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    expect(page.locator("article.message-assistant .md")).to_have_text("Hello.")


def test_an_agent_disabled_after_the_page_loaded_closes_the_composer_at_the_refusal(
    page: Page, live_server_url: str, world: World
) -> None:
    conversation = make_conversation(
        world.user,
        world.project,
        "Old talk",
        [("user", "Hi"), ("assistant", "Hello.")],
        agent_definition=world.agent,
    )
    log_in(page, live_server_url, "ada")
    page.goto(f"{live_server_url}/chat/{conversation.id}/")
    # Loaded (the agents read, with the definition still enabled) before the operator disables it.
    expect(page.locator("body[data-ready='true']")).to_be_attached()
    box = page.get_by_role("textbox", name="Message")
    expect(box).to_be_enabled()
    AgentDefinition.objects.filter(id=world.agent.id).update(disabled_reason="its model was retired")

    box.fill("Anything new?")
    box.press("Enter")

    expect(page.get_by_role("status").filter(has_text="is disabled")).to_contain_text("its model was retired")
    expect(box).to_be_disabled()
    expect(page.get_by_role("button", name="Send")).to_be_disabled()


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

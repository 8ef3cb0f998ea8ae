"""The chat page's issue-14 modules (search.js, answers.js, share.js) and the share page, in chromium."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import urlparse

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from apps.chat.conversations.sharing import share_create
from apps.chat.models import ConversationShare, MessageFeedback
from apps.projects.selectors import principal_from_user
from tests.chat.browser.helpers import PASSWORD, World, log_in, screenshot
from tests.factories import add_member, make_agent_answer, make_conversation, make_user

pytestmark = pytest.mark.browser


def test_search_box_finds_a_conversation_by_a_word_of_an_answer(
    page: Page, live_server_url: str, world: World
) -> None:
    hit = make_conversation(world.user, world.project, "Weekend", [("user", "Where to go?")])
    make_agent_answer(hit, "Visit the lighthouses of Brittany.")
    make_conversation(world.user, world.project, "Other", [("user", "Something else entirely")])
    log_in(page, live_server_url, "ada")

    page.get_by_label("Search conversations").fill("lighthouse")

    results = page.locator("#search-results")
    expect(results.locator(".conversation-item")).to_have_count(1)
    expect(results.locator("mark")).to_have_text("lighthouses")
    expect(page.locator("#conversation-list")).to_be_hidden()
    screenshot(page, "conversation-search.png")
    results.get_by_role("link").click()
    expect(page).to_have_url(re.compile(rf"/chat/{hit.id}/$"))


def test_thumbs_down_with_a_comment_is_stored_and_shows_in_the_admin(
    page: Page, browser: Browser, live_server_url: str, world: World
) -> None:
    conversation = make_conversation(world.user, world.project, "Capitals", [("user", "Capital of France?")])
    answer = make_agent_answer(conversation, "Lyon.", input_tokens=1200, output_tokens=40)
    log_in(page, live_server_url, "ada")
    page.goto(f"{live_server_url}/chat/{conversation.id}/")
    article = page.locator(f'[data-message-id="{answer.id}"]')

    article.get_by_role("button", name="Bad answer").click()
    article.get_by_label("What was wrong? (optional)").fill("The capital is Paris")
    article.get_by_role("button", name="Send feedback").click()

    expect(article.get_by_role("button", name="Bad answer")).to_have_attribute("aria-pressed", "true")
    expect(article.locator(".message-usage")).to_contain_text("1,200 in · 40 out tokens")
    screenshot(page, "answer-feedback.png")
    feedback = MessageFeedback.objects.get(message_id=answer.id)
    assert (feedback.rating, feedback.comment) == ("down", "The capital is Paris")
    get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)
    admin = browser.new_context()
    try:
        other = admin.new_page()
        other.goto(f"{live_server_url}/admin/login/?next=/admin/chat/messagefeedback/%3Frating%3Ddown")
        other.get_by_label("Username").fill("root")
        other.get_by_label("Password").fill(PASSWORD)
        other.get_by_role("button", name="Log in").click()
        expect(other.locator("#result_list")).to_contain_text("The capital is Paris")
        expect(other.locator("#result_list").get_by_role("link", name=re.compile("^run "))).to_be_visible()
    finally:
        admin.close()


def test_export_downloads_markdown_and_a_share_link_opens_read_only_for_a_member_only(
    page: Page, browser: Browser, live_server_url: str, world: World
) -> None:
    conversation = make_conversation(world.user, world.project, "Capitals", [("user", "Capital of France?")])
    make_agent_answer(conversation, f"It is [Paris](entity:{world.e['paris'].id}).")
    add_member(world.project, make_user("grace"), "viewer")
    make_user("mallory")
    log_in(page, live_server_url, "ada")
    page.goto(f"{live_server_url}/chat/{conversation.id}/")

    with page.expect_download() as download:
        page.get_by_role("link", name="Export Markdown").click()
    markdown = open(download.value.path(), encoding="utf-8").read()
    page.get_by_role("button", name="Share…").click()
    page.get_by_role("button", name="Create link").click()
    url = page.get_by_label("Share link").input_value()

    assert markdown.startswith("# Capitals") and "It is Paris." in markdown
    assert re.search(r"/share/[A-Za-z0-9_-]{43}$", url)
    for username, status in (("grace", 200), ("mallory", 404)):
        context = browser.new_context()
        try:
            other = context.new_page()
            other.goto(url)
            other.get_by_label("Username").fill(username)
            other.get_by_label("Password").fill(PASSWORD)
            with other.expect_response(lambda r: urlparse(r.url).path.startswith("/share/")) as shown:
                other.get_by_role("button", name="Log in").click()
            assert shown.value.status == status
            if status == 200:
                expect(other.get_by_role("heading", name="Capitals")).to_be_visible()
                expect(other.locator("#shared-messages")).to_contain_text("It is Paris.")
                expect(other.locator("textarea")).to_have_count(0)
                screenshot(other, "share-page.png")
            else:
                expect(other.get_by_role("heading", name="This link does not work")).to_be_visible()
                expect(other.locator("body")).not_to_contain_text("Capital of France?")
        finally:
            context.close()


def test_the_share_dialog_lists_the_links_with_status_and_expiry_and_revokes_one(
    page: Page, live_server_url: str, world: World
) -> None:
    conversation = make_conversation(world.user, world.project, "Capitals", [("user", "Capital of France?")])
    make_agent_answer(conversation, "It is Paris.")
    principal = principal_from_user(world.user)
    expired, _ = share_create(principal=principal, conversation_id=conversation.id, expires_in_hours=1)
    ConversationShare.objects.filter(id=expired.id).update(
        created_at=timezone.now() - timedelta(hours=3), expires_at=timezone.now() - timedelta(hours=2)
    )
    lasting, _ = share_create(principal=principal, conversation_id=conversation.id)
    log_in(page, live_server_url, "ada")
    page.goto(f"{live_server_url}/chat/{conversation.id}/")

    page.get_by_role("button", name="Share…").click()
    dialog = page.get_by_role("dialog", name="Share read-only")
    links = dialog.get_by_role("list", name="Links").get_by_role("listitem")
    expect(links).to_have_count(2)
    expect(links.nth(0)).to_contain_text("Active, no expiry")
    expect(links.nth(1)).to_contain_text("Expired")
    expect(links.nth(1).get_by_role("button", name=re.compile("Revoke"))).to_have_count(0)
    dialog.get_by_label("Expires").select_option(label="In 7 days")
    dialog.get_by_role("button", name="Create link").click()
    url = dialog.get_by_label("Share link").input_value()
    expect(links).to_have_count(3)
    expect(links.nth(0)).to_contain_text("Active, expires")
    expect(links.nth(0)).to_contain_text("by ada")
    links.nth(0).get_by_role("button", name=re.compile("Revoke")).click()

    expect(links.nth(0)).to_contain_text("Revoked")
    expect(links.nth(0).get_by_role("button", name=re.compile("Revoke"))).to_have_count(0)
    expect(links.nth(1)).to_contain_text("Active, no expiry")
    newest = ConversationShare.objects.exclude(id__in=[expired.id, lasting.id]).get()
    assert newest.revoked_at is not None and newest.expires_at is not None
    assert ConversationShare.objects.get(id=lasting.id).revoked_at is None
    client = Client()
    client.force_login(world.user)
    assert client.get(f"/api/shares/{url.rsplit('/', 1)[-1]}").status_code == 404

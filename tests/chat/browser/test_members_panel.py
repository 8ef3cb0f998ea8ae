"""The project settings panel (static/chat/settings.js): invite by link, accept, roles, removal."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from apps.projects.models import ProjectMembership
from tests.chat.browser.helpers import PASSWORD, World, log_in, screenshot
from tests.factories import add_member, make_user

pytestmark = pytest.mark.browser


def open_panel(page: Page):
    page.get_by_role("button", name="Members").click()
    dialog = page.locator("#settings-dialog")
    expect(dialog.get_by_role("heading", name="Atlas · settings")).to_be_visible()
    return dialog


def test_owner_invites_by_link_the_invitee_joins_then_the_owner_changes_and_removes_them(
    page: Page, browser: Browser, live_server_url: str, world: World
) -> None:
    make_user("grace")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server_url)
    log_in(page, live_server_url, "ada")
    dialog = open_panel(page)
    dialog.get_by_label("Role for the invited person").select_option("editor")
    dialog.get_by_role("button", name="Create invite link").click()
    link = dialog.get_by_label("Invitation link")
    expect(link).to_have_value(re.compile(r"/invite/kgi_"))
    expect(dialog.get_by_label("Role for the invited person")).to_have_value("editor")
    url = link.input_value()
    dialog.get_by_role("button", name="Copy").click()
    expect(dialog.get_by_role("button", name="Copied")).to_be_visible()
    copied = page.evaluate("navigator.clipboard.readText()")
    screenshot(page, "members-panel-desktop.png")

    invitee = browser.new_context(viewport={"width": 1280, "height": 860})
    try:
        other = invitee.new_page()
        other.goto(url)
        expect(other).to_have_url(re.compile(r"/accounts/login/\?next=/invite/kgi_"))
        other.get_by_label("Username").fill("grace")
        other.get_by_label("Password").fill(PASSWORD)
        other.get_by_role("button", name="Log in").click()
        expect(other.get_by_role("heading", name="Join Atlas")).to_be_visible()
        other.get_by_role("button", name="Accept and join").click()
        expect(other).to_have_url(re.compile(r"/chat/$"))
        expect(other.locator("#project-select")).to_contain_text("Atlas")
    finally:
        invitee.close()

    dialog.get_by_role("button", name="Close").click()
    dialog = open_panel(page)
    grace = dialog.locator('[data-username="grace"]')
    expect(dialog.get_by_label("Role of grace")).to_have_value("editor")
    dialog.get_by_label("Role of grace").select_option("viewer")
    expect(dialog.get_by_role("status")).to_have_text("grace is now viewer.")
    role_after_change = ProjectMembership.objects.get(project=world.project, user__username="grace").role
    page.once("dialog", lambda d: d.accept())
    dialog.get_by_role("button", name="Remove grace").click()
    expect(grace).to_have_count(0)

    assert copied == url
    assert role_after_change == "viewer"
    assert not ProjectMembership.objects.filter(project=world.project, user__username="grace").exists()


def test_a_viewer_sees_the_members_but_no_role_controls_or_invitations(
    page: Page, live_server_url: str, world: World
) -> None:
    add_member(world.project, make_user("vera"), "viewer")
    log_in(page, live_server_url, "vera")

    dialog = open_panel(page)

    expect(dialog.get_by_text("You are viewer in this project.")).to_be_visible()
    expect(dialog.locator('[data-username="ada"]')).to_contain_text("owner")
    expect(dialog.locator("select")).to_have_count(0)
    expect(dialog.get_by_role("button", name="Create invite link")).to_have_count(0)
    expect(dialog.get_by_role("button", name="Leave this project")).to_be_visible()
    expect(dialog.get_by_role("button", name=re.compile("^Remove"))).to_have_count(0)


def test_the_last_owner_is_told_why_they_cannot_step_down(
    page: Page, live_server_url: str, world: World
) -> None:
    log_in(page, live_server_url, "ada")
    dialog = open_panel(page)

    dialog.get_by_label("Role of ada").select_option("viewer")

    expect(dialog.get_by_role("alert")).to_contain_text("at least one owner")
    expect(dialog.get_by_label("Role of ada")).to_have_value("owner")
    assert ProjectMembership.objects.get(project=world.project, user=world.user).role == "owner"


def test_owner_adds_a_member_by_e_mail_and_an_unknown_name_is_explained(
    page: Page, live_server_url: str, world: World
) -> None:
    hugo = make_user("hugo")
    type(hugo).objects.filter(pk=hugo.pk).update(email="hugo@example.org")
    log_in(page, live_server_url, "ada")
    dialog = open_panel(page)

    dialog.get_by_label("Username or e-mail").fill("nobody-like-that")
    dialog.get_by_role("button", name="Add", exact=True).click()
    expect(dialog.get_by_role("alert")).to_contain_text("no user with that username")
    dialog.get_by_label("Username or e-mail").fill("hugo@example.org")
    dialog.get_by_label("Role for the new member").select_option("editor")
    dialog.get_by_role("button", name="Add", exact=True).click()

    expect(dialog.get_by_role("status")).to_have_text("hugo@example.org was added as editor.")
    expect(dialog.get_by_label("Role of hugo")).to_have_value("editor")
    assert ProjectMembership.objects.get(project=world.project, user=hugo).role == "editor"

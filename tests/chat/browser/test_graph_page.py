"""The graph pages in chromium (#51): from the chat page to the graph, to an entity, its drawing
and its history; and a duplicate pair merged from the queue, reviewed by a second member."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from apps.graph_tools.importer import graph_import
from apps.graph_tools.models import GraphObject
from tests.chat.browser.helpers import World, log_in, screenshot
from tests.factories import add_member, make_entity, make_relationship, make_user

pytestmark = pytest.mark.browser


def test_a_member_browses_from_the_chat_to_an_entity_expands_its_drawing_and_opens_its_history(
    page: Page, live_server_url: str, world: World
) -> None:
    e = world.e
    make_relationship(world.project, e["euro"], "USED_IN", make_entity(world.project, "ecb", "Bank", "ECB"))
    log_in(page, live_server_url, "ada")

    page.locator("#graph-link").click()
    expect(page).to_have_url(re.compile(rf"/projects/{world.project.id}/graph$"))
    expect(page.locator("#entity-types [data-type='City'] .count")).to_have_text("2")
    screenshot(page, "graph-page-desktop.png")
    page.locator("#entity-types [data-type='City'] a").click()
    page.get_by_role("link", name="Paris", exact=True).click()

    expect(page.locator("#entity-name")).to_have_text("Paris")
    drawing = page.locator("#neighbourhood[data-ready='true']")
    expect(drawing).to_have_attribute("data-nodes", "2")  # Paris and France
    page.locator(f"#neighbourhood .node[data-entity-id='{e['france'].id}']").click()
    expect(drawing).to_have_attribute("data-nodes", "4")  # + Lyon and Euro
    expect(page.locator("#neighbourhood-selected")).to_have_text("France")
    page.locator(f"#neighbourhood .node[data-entity-id='{e['euro'].id}']").click()
    expect(drawing).to_have_attribute("data-nodes", "5")  # + ECB
    page.locator("#neighbourhood-types input[data-type='City']").uncheck()
    expect(page.locator(f"#neighbourhood .node[data-entity-id='{e['lyon'].id}']")).to_be_hidden()
    screenshot(page, "graph-entity-desktop.png")

    page.locator("#entity-history summary").click()
    expect(page.locator("#entity-history")).to_contain_text("No recorded change")  # made outside the audit
    page.locator("#neighbourhood-selected").click()
    expect(page.locator("#entity-name")).to_have_text("Euro")


def test_a_member_sees_an_entitys_history_with_version_author_and_authority(
    page: Page, live_server_url: str, world: World
) -> None:
    body = '{"kind":"entity","key":"porto","type":"City","name":"Porto","description":"A city in the north"}'
    graph_import(project=world.project, lines=[body], user_id=world.user.pk)
    porto = GraphObject.objects.get(project=world.project, key="porto")
    log_in(page, live_server_url, "ada")

    page.goto(f"{live_server_url}/projects/{world.project.id}/graph?q=Porto")
    page.get_by_role("link", name="Porto", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/graph/entities/{porto.id}$"))
    page.get_by_text("1 change of it").click()

    row = page.locator("#history-table .history-row").first
    expect(row).to_be_visible()
    expect(row).to_contain_text("v1")
    expect(row).to_contain_text("ada")
    expect(row).to_contain_text("Graph import")


def test_a_duplicate_pair_merged_from_the_queue_is_approved_by_a_second_member_and_undone(
    page: Page, browser: Browser, live_server_url: str, world: World
) -> None:
    project = world.project
    twin = make_entity(project, "paris-2", "City", "Pariss", description="The French capital")
    make_relationship(project, twin, "LOCATED_IN", world.e["france"])
    add_member(project, make_user("grace"), "editor")
    log_in(page, live_server_url, "ada")
    second = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
    log_in(second, live_server_url, "grace")
    sets_url = f"{live_server_url}/projects/{project.id}/graph/change-sets"

    page.goto(f"{live_server_url}/projects/{project.id}/graph/queues?kind=duplicates")
    pair = page.locator(f".duplicate-pair[data-b='{twin.id}']")
    expect(pair).to_contain_text("trigram 0.63")
    pair.get_by_role("button", name="Propose merge").click()
    expect(pair.locator(".merge-status")).to_contain_text("Proposed: change set")
    merge_id = pair.get_attribute("data-proposed")
    screenshot(page, "graph-queues-duplicates-desktop.png")
    second.goto(sets_url)
    second.locator(f".change-set[data-change-set-id='{merge_id}']").get_by_role(
        "button", name="Approve"
    ).click()
    expect(second.locator(f".change-set[data-change-set-id='{merge_id}']")).to_have_attribute(
        "data-status", "applied"
    )
    page.reload()

    expect(page.locator(f".duplicate-pair[data-b='{twin.id}']")).to_have_count(0)
    page.goto(f"{live_server_url}/projects/{project.id}/graph/entities/{world.e['paris'].id}")
    expect(page.locator("#entity-aliases")).to_contain_text("Pariss")
    page.locator("#entity-history summary").click()
    expect(page.locator("#history-table .history-row[data-action='merge_entities']").first).to_be_visible()

    page.goto(sets_url)
    page.locator(f".change-set[data-change-set-id='{merge_id}']").get_by_role("button", name="Undo").click()
    undo = page.locator(".change-set[data-status='review']")
    expect(undo).to_have_count(1)
    merged = page.locator(f".change-set[data-change-set-id='{merge_id}']")
    expect(merged.locator(".undo-state")).to_have_text("undo in review")
    expect(merged.get_by_role("button", name="Undo")).to_have_count(0)
    screenshot(page, "graph-change-sets-desktop.png")
    second.goto(sets_url)
    second.locator(".change-set[data-status='review']").get_by_role("button", name="Approve").click()
    expect(second.locator(".change-set[data-status='review']")).to_have_count(0)
    expect(second.locator(f".change-set[data-change-set-id='{merge_id}'] .undo-state")).to_contain_text(
        "undone by"
    )
    page.goto(f"{live_server_url}/projects/{project.id}/graph/entities/{twin.id}")
    expect(page.locator("#entity-name")).to_have_text("Pariss")
    second.context.close()

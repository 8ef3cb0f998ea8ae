"""The sidebar (rename, delete with confirmation) and persisted conversations drawn like live ones."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, Route, expect

from apps.chat.models import Conversation, Message
from apps.graph_tools.registry import WriteAuthorization
from apps.graph_tools.write_plans import UpdateEntityArgs
from apps.graph_tools.writes import write_apply
from tests.chat.browser.helpers import World, log_in, screenshot

pytestmark = pytest.mark.browser


def conversation(world: World, title: str, minutes_ago: int) -> Conversation:
    when = timezone.now() - timedelta(minutes=minutes_ago)
    return Conversation.objects.create(
        project=world.project, user=world.user, title=title, created_at=when, updated_at=when
    )


def test_rename_and_delete_a_conversation(page: Page, live_server_url: str, world: World) -> None:
    older = conversation(world, "Older question", 30)
    newer = conversation(world, "Newer question", 5)
    log_in(page, live_server_url, "ada")

    items = page.locator(".conversation-item .conversation-name")
    expect(items).to_have_text(["Newer question", "Older question"])

    page.get_by_role("button", name="Rename “Older question”").click()
    title = page.get_by_role("textbox", name="New title")
    expect(title).to_be_focused()
    title.fill("Rivers of France")
    title.press("Enter")
    expect(page.locator(f'[data-conversation-id="{older.id}"] .conversation-name')).to_have_text(
        "Rivers of France"
    )
    older.refresh_from_db()
    assert older.title == "Rivers of France"

    page.get_by_role("button", name="Rename “Newer question”").click()
    page.get_by_role("textbox", name="New title").fill("not saved")
    page.keyboard.press("Escape")
    expect(page.locator(f'[data-conversation-id="{newer.id}"] .conversation-name')).to_have_text(
        "Newer question"
    )

    delete = page.get_by_role("button", name="Delete “Newer question”")
    delete.click()
    dialog = page.get_by_role("dialog", name="Delete conversation?")
    expect(dialog).to_contain_text("Newer question")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert Conversation.objects.filter(id=newer.id).exists()

    delete.click()
    dialog.get_by_role("button", name="Delete").click()
    expect(page.locator(f'[data-conversation-id="{newer.id}"]')).to_have_count(0)
    assert not Conversation.objects.filter(id=newer.id).exists()
    expect(items).to_have_text(["Rivers of France"])


def test_deleting_the_open_conversation_returns_to_a_new_chat(
    page: Page, live_server_url: str, world: World
) -> None:
    current = conversation(world, "Open one", 1)
    log_in(page, live_server_url, "ada")
    page.goto(f"{live_server_url}/chat/{current.id}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Open one")

    page.get_by_role("button", name="Delete “Open one”").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()

    expect(page).to_have_url(re.compile(r"/chat/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("New chat")


def test_persisted_agent_turn_is_drawn_with_chips_graph_and_links(
    page: Page, live_server_url: str, world: World
) -> None:
    france, paris, lyon = world.e["france"], world.e["paris"], world.e["lyon"]
    conv = conversation(world, "Capital", 2)
    conv.agent_definition = world.agent
    conv.save()
    t0 = timezone.now() - timedelta(minutes=2)

    def at(seconds: int) -> object:
        return t0 + timedelta(seconds=seconds)

    def ref(e: object) -> dict[str, str]:
        return {"id": str(e.id), "key": e.key, "type": e.type, "name": e.name}  # type: ignore[attr-defined]

    traverse = {
        "nodes": [{**ref(france), "depth": 0}, {**ref(paris), "depth": 1}, {**ref(lyon), "depth": 1}],
        "edges": [
            {"id": "e1", "type": "CAPITAL_OF", "src_id": str(paris.id), "dst_id": str(france.id)},
            {"id": "e2", "type": "LOCATED_IN", "src_id": str(lyon.id), "dst_id": str(france.id)},
        ],
        "truncated": False,
    }
    calls = [
        {"id": "c1", "name": "search_entities", "input": {"query": "France"}},
        {"id": "c2", "name": "traverse_graph", "input": {"start_entity_id": "france", "max_depth": 1}},
    ]
    rows = [
        ("user", "What is around France?", [], None, 0),
        ("assistant", "", calls[:1], None, 1),
        ("tool", "", [{**calls[0], "output": {"results": [ref(france)]}}], None, 2),
        ("assistant", "", calls[1:], None, 3),
        ("tool", "", [{**calls[1], "output": traverse}], None, 4),
        ("assistant", f"[Paris](entity:{paris.id}) and Lyon are in France.", [], {"agent_run_id": None}, 5),
        ("user", "And a failed one?", [], None, 6),
        (
            "assistant",
            "",
            [{"id": "c3", "name": "get_entity_edges", "input": {"entity_id": "nowhere"}}],
            None,
            7,
        ),
        (
            "tool",
            "",
            [{"id": "c3", "name": "get_entity_edges", "error": "entity not found: nowhere"}],
            None,
            8,
        ),
        ("assistant", "No such entity.", [], None, 9),
    ]
    for role, content, tool_calls, context, seconds in rows:
        Message.objects.create(
            conversation=conv,
            role=role,
            content=content,
            tool_calls=tool_calls,
            retrieval_context=context,
            created_at=at(seconds),
        )
    log_in(page, live_server_url, "ada")

    page.goto(f"{live_server_url}/chat/{conv.id}/")

    answers = page.locator("article.message-assistant")
    expect(answers).to_have_count(2)
    first = answers.nth(0)
    expect(first.locator(".tool-chip")).to_have_count(2)
    expect(first.locator(".tool-chip .tool-name")).to_have_text(["search_entities", "traverse_graph"])
    expect(first.locator(".tool-chip").nth(1)).to_have_attribute("data-status", "completed")
    expect(first.locator(".graph-node")).to_have_count(3)
    expect(first.locator(".graph-edge")).to_have_count(2)
    expect(first.locator(f'.md a.entity-link[data-entity-id="{paris.id}"]')).to_have_text("Paris")
    expect(first.locator(".md a.entity-mention")).to_have_text(["Lyon", "France"])
    failed = answers.nth(1).locator(".tool-chip")
    expect(failed).to_have_attribute("data-status", "error")
    failed.locator("summary").click()
    expect(failed).to_contain_text("entity not found: nowhere")
    expect(page.get_by_role("heading", level=1)).to_have_text("Capital")
    expect(page.locator("#agent-badge")).to_have_text("graph-query-agent")

    first.locator(".md a.entity-mention", has_text="Lyon").click()
    panel = page.get_by_role("complementary")
    expect(panel.get_by_role("heading", name="Lyon")).to_be_visible()
    expect(panel).to_contain_text("A city on the Rhône")
    panel.locator("a.entity-link", has_text="France").click()
    expect(panel.get_by_role("heading", name="France")).to_be_visible()
    expect(panel).to_contain_text("A country in Europe")
    screenshot(page, "history-entity-panel-desktop.png")


def test_the_entity_panel_shows_the_entity_s_change_history(
    page: Page, live_server_url: str, world: World
) -> None:
    lyon = world.e["lyon"]

    write_apply(
        project_id=world.project.id,
        tool_name="update_entity",
        args=UpdateEntityArgs(entity_id="lyon", description="The third city of France"),
        authorization=WriteAuthorization(via="direct", user_id=world.user.id),
    )
    conv = conversation(world, "Cities", 1)
    Message.objects.create(conversation=conv, role="user", content="Which city?")
    Message.objects.create(conversation=conv, role="assistant", content=f"[Lyon](entity:{lyon.id}).")
    log_in(page, live_server_url, "ada")

    page.goto(f"{live_server_url}/chat/{conv.id}/")
    page.locator(f'article.message-assistant .md a.entity-link[data-entity-id="{lyon.id}"]').click()

    panel = page.get_by_role("complementary")
    expect(panel.get_by_role("heading", name="Changes (1)")).to_be_visible()
    change = panel.locator(".change-list li.change")
    expect(change).to_have_count(1)
    expect(change).to_contain_text("updated description")
    expect(change).to_contain_text("by ada (direct)")
    expect(panel).to_contain_text("The third city of France")


def test_a_link_to_a_conversation_of_another_project_shows_that_project_and_its_agent(
    page: Page, live_server_url: str, world: World
) -> None:
    from apps.agents.models import AgentDefinition
    from tests.factories import make_project

    zephyr = make_project(owner=world.user, name="Zephyr")
    agent = AgentDefinition.objects.create(
        project=zephyr, name="zephyr-agent", system_prompt="You answer.", model={"name": "x"}, tools=[]
    )
    conv = Conversation.objects.create(project=zephyr, user=world.user, title="Winds", agent_definition=agent)
    Conversation.objects.create(project=world.project, user=world.user, title="Atlas question")
    log_in(page, live_server_url, "ada")
    page.locator("#project-select").select_option(label="Atlas")
    expect(page.locator(".conversation-item .conversation-name")).to_have_text(["Atlas question"])

    page.goto(f"{live_server_url}/chat/{conv.id}/")

    expect(page.locator("#agent-badge")).to_have_text("zephyr-agent")
    expect(page.locator("#project-select option:checked")).to_have_text("Zephyr")
    expect(page.locator(".conversation-item .conversation-name")).to_have_text(["Winds"])


def test_switching_projects_quickly_shows_the_agents_and_conversations_of_the_last_one_chosen(
    page: Page, live_server_url: str, world: World
) -> None:
    """The answers for the project chosen first arrive last (held back here): they are dropped."""
    from apps.agents.models import AgentDefinition
    from tests.factories import make_project

    zephyr = make_project(owner=world.user, name="Zephyr")
    AgentDefinition.objects.create(
        project=zephyr, name="zephyr-agent", system_prompt="You answer.", model={"name": "x"}, tools=[]
    )
    Conversation.objects.create(project=zephyr, user=world.user, title="Winds")
    Conversation.objects.create(project=world.project, user=world.user, title="Atlas question")
    log_in(page, live_server_url, "ada")
    page.locator("#project-select").select_option(label="Zephyr")
    expect(page.locator(".conversation-item .conversation-name")).to_have_text(["Winds"])
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    page.route(f"**/api/projects/{world.project.id}/agent-definitions*", hold)
    page.route(f"**/api/chat/conversations?projectId={world.project.id}*", hold)

    page.locator("#project-select").select_option(label="Atlas")
    for _ in range(100):
        if len(held) == 2:
            break
        page.wait_for_timeout(50)
    assert len(held) == 2, "the page did not ask for Atlas's agents and conversations"
    page.locator("#project-select").select_option(label="Zephyr")
    expect(page.locator(".agent-option-name")).to_have_text(["zephyr-agent", "Plain chat"])
    for route in held:
        route.continue_()
    page.wait_for_timeout(1000)

    expect(page.locator(".agent-option-name")).to_have_text(["zephyr-agent", "Plain chat"])
    expect(page.locator(".conversation-item .conversation-name")).to_have_text(["Winds"])

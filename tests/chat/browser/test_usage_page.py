"""The usage page (issue #14 item 6) in chromium: reached from the settings dialog, it draws its charts."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect

from apps.agents.models import AgentRun, AgentRunToolCall
from apps.chat.models import Message, MessageFeedback
from tests.chat.browser.helpers import World, log_in, screenshot
from tests.factories import make_agent_answer, make_conversation

pytestmark = pytest.mark.browser

STOPS = ["completed"] * 5 + ["max_steps", "completed", "doom_loop", "completed", "timeout", "cancelled"]


def seed_runs(world: World, days: int = 12) -> None:
    """A dozen days of turns: more each day, with a spread of stop reasons, latency and tool errors."""
    conversation = make_conversation(world.user, world.project, "Busy", agent_definition=world.agent)
    today = datetime.now(UTC).replace(hour=9, minute=0, second=0, microsecond=0)
    n = 0
    for d in range(days):
        day = today - timedelta(days=days - 1 - d)
        for k in range(1 + d % 4 + d // 3):
            at = day + timedelta(minutes=10 * k)
            Message.objects.create(conversation=conversation, role="user", content="q", created_at=at)
            answer = make_agent_answer(
                conversation,
                "a",
                model="openai/test-model",
                input_tokens=800 + 150 * k + 40 * d,
                output_tokens=120 + 30 * k,
                created_at=at + timedelta(seconds=2),
            )
            stop = STOPS[n % len(STOPS)]
            AgentRun.objects.filter(id=answer.retrieval_context["agent_run_id"]).update(
                started_at=at,
                completed_at=at + timedelta(milliseconds=900 + 400 * k + 35 * d),
                stop_reason=stop,
                status="success" if stop == "completed" else "error",
            )
            AgentRunToolCall.objects.create(
                run_id=answer.retrieval_context["agent_run_id"],
                tool_name="search",
                error="" if n % 5 else "boom",
            )
            if n % 3 == 0:
                MessageFeedback.objects.create(
                    message=answer, user=world.user, rating="up" if n % 2 else "down"
                )
            n += 1


def test_the_usage_page_draws_its_plots_for_a_project_with_seeded_runs(
    page: Page, live_server_url: str, world: World
) -> None:
    seed_runs(world)
    log_in(page, live_server_url, "ada")

    page.locator("#settings-button").click()
    page.locator("#usage-link").click()

    expect(page).to_have_url(re.compile(rf"/projects/{world.project.id}/usage$"))
    expect(page.get_by_role("heading", name="Usage of Atlas")).to_be_visible()
    charts = page.locator("svg.usage-chart")
    expect(charts).to_have_count(4)
    expect(page.get_by_role("img", name="Turns per day").locator("rect.bar")).to_have_count(12)
    expect(page.get_by_role("img", name="Stop reasons").locator("rect.bar")).to_have_count(5)
    expect(page.get_by_role("img", name="Time to done per day (ms)").locator("circle.point")).to_have_count(
        24
    )
    box = charts.first.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 50
    page.set_viewport_size({"width": 1000, "height": 1500})
    screenshot(page, "usage-page.png")

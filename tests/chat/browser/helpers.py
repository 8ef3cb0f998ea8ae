"""Helpers shared by the browser tests."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from apps.agents.models import AgentDefinition
from apps.projects.models import Project

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TEST_MODEL = "openai/test-model"
PASSWORD = "pw-for-tests-1"
SCREENSHOTS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"
STATIC = Path(__file__).resolve().parents[3] / "static"


@dataclass
class World:
    """A user with a project whose small graph the test model's tool calls can reach."""

    user: Any
    project: Project
    agent: AgentDefinition
    e: dict[str, Any]


def log_in(page: Page, base_url: str, username: str, password: str = PASSWORD) -> None:
    page.goto(f"{base_url}/chat/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/chat/$"))
    expect(page.locator("body[data-ready='true']")).to_be_attached()


def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=False)

"""Issue #27 in the browser, with one process and no Redis (``make run``): the chat page follows an
agent turn while its only daphne is killed with SIGKILL and started again on the same port. The
page reconnects on its own, and the turn finishes in place: no reload, no "interrupted" notice,
the write's chip once, the text going on where it stopped to the stored answer.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from apps.agents.definitions import default_agents_install
from apps.agents.models import AgentDefinition, AgentRun
from apps.chat.models import Conversation, Message
from apps.graph_tools.models import GraphChange
from bench.support import ServerProcess, free_port, start_daphne, wait_ready
from tests.chat.browser.helpers import log_in
from tests.chat.streams.test_multiprocess import WAIT, one_process_env
from tests.chat.turns.test_resume_kill import ANSWER, ANSWER_WORDS, LEASE_SECONDS, Script
from tests.factories import make_project, make_user
from tests.llm_server import LLMTestServer

pytestmark = pytest.mark.browser

SHOWN_WORDS = 4  # the answer's words the first process streams before its model holds the rest


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def model(script: Script) -> Iterator[LLMTestServer]:
    with LLMTestServer(responder=script) as server:
        yield server


@pytest.fixture
def world(transactional_db: None) -> dict[str, Any]:
    user = make_user("ada")
    project = make_project(owner=user, name="Atlas")
    default_agents_install(project=project)
    AgentDefinition.objects.filter(project=project).update(is_default=False)
    agent = AgentDefinition.objects.get(project=project, name="graph-query-agent")
    agent.tools = ["create_entity"]
    agent.tool_policy = {"create_entity": {"approval": "never"}}
    agent.is_default = True
    agent.save()
    return {"user": user, "project": project, "agent": agent}


class Daphne:
    """The one server process, on one port, started again after it was killed."""

    def __init__(self, env: dict[str, str], logdir: str) -> None:
        self.env, self.logdir, self.port = env, logdir, free_port()
        self.started: list[ServerProcess] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerProcess:
        name = f"run{len(self.started) + 1}"
        server = start_daphne(name, env=self.env, log=Path(self.logdir) / f"{name}.log", port=self.port)
        self.started.append(server)
        wait_ready(server, timeout=90)  # listening: the page's own reconnect is its first request
        return server

    def kill(self) -> None:
        server = self.started[-1]
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(10)


@pytest.fixture
def daphne(django_db_blocker: Any, model: LLMTestServer) -> Iterator[Daphne]:
    with django_db_blocker.unblock():
        env = one_process_env(model.base_url, LEASE_SECONDS)
    with tempfile.TemporaryDirectory() as logdir:
        server = Daphne(env, logdir)
        try:
            yield server
        finally:
            for process in server.started:
                process.stop(15)
            for process in server.started:
                print(f"--- daphne {process.name} ---", file=sys.__stderr__)
                print(process.output()[-4000:], file=sys.__stderr__)


def _until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def test_the_page_follows_its_turn_through_a_kill_and_restart_of_the_only_process(
    page: Page, daphne: Daphne, world: dict[str, Any], script: Script
) -> None:
    daphne.start()
    script.hold_answer, script.hold_after = True, SHOWN_WORDS + 1  # its first chunk has no text
    log_in(page, daphne.url, "ada")
    page.evaluate("window.__sameDocument = true")

    box = page.get_by_role("textbox", name="Message")
    box.fill("Add Lyon")
    box.press("Enter")
    turn = page.locator("article.message-assistant").last
    shown = "".join(ANSWER_WORDS[:SHOWN_WORDS])
    expect(turn.locator(".md")).to_have_text(shown.strip())
    expect(turn.locator(".tool-chip")).to_have_attribute("data-status", "completed")
    conversation = Conversation.objects.get(user=world["user"])

    def saved() -> bool:  # the page has every frame published; the turn's mark counts them all
        mark = Conversation.objects.get(id=conversation.id).active_turn_shown
        return mark.get("chars") == len(shown)

    _until(saved, "the turn's mark saved once its text paused")
    daphne.kill()
    script.release.set()
    expect(page.locator("#connection-status")).to_have_attribute("data-state", "closed")
    daphne.start()

    expect(turn).to_have_attribute("data-state", "done", timeout=WAIT * 1000)
    assert page.evaluate("window.__sameDocument") is True  # never reloaded
    expect(page.locator("#connection-status")).to_have_attribute("data-state", "open")
    assert turn.locator(".md").inner_text().strip() == ANSWER.strip()
    expect(turn.locator(".tool-chip")).to_have_count(1)
    expect(turn.locator(".tool-chip")).to_have_attribute("data-status", "completed")
    assert turn.get_attribute("data-error") is None
    expect(turn.get_by_text("interrupted")).to_have_count(0)
    answers = Message.objects.filter(conversation=conversation, role="assistant").order_by("created_at")
    assert [m.content for m in answers] == ["", ANSWER]  # the write's call (its row), the answer once
    run = AgentRun.objects.get(conversation_id=conversation.id)
    assert (run.status, run.attempts, run.worker) == ("success", 2, daphne.started[-1].worker)
    assert GraphChange.objects.filter(project=world["project"], action="create_entity").count() == 1

"""The chat page's main flows in Debian's chromium (Playwright): log in, ask an agent, see its
tool chip and its streamed tokens, and find the answer stored after a reload; and a message sent
before the page's socket is open (the page just opened, or the server closed the socket) is sent
once it is, or refused visibly with Retry (issue #47); a document uploaded in the Documents dialog
shows its mentions on their own page, each linked to its entity or a candidate (issue #48)."""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, Route, WebSocketRoute, expect, sync_playwright

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


# -- Messages sent while the page's socket is not open (issue #47) ------------------------------


def log_in(page: Page, world: World, username: str) -> None:
    page.goto(f"{world.url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("body[data-ready='true']")).to_be_attached()


def conversation_of(world: World, username: str) -> str:
    """A plain conversation of the user's, answered once (over SSE)."""
    turn = world.api(username).stream(
        {"message": "Who wrote the first program?", "projectId": world.project_id}
    )
    return str(turn.meta["conversationId"])


class KgchatSide:
    """The page's sockets go through Playwright on to kgchat, so the test can close the open one
    as kgchat does when it stops (close code 1012, both ends), and hold back what the page sends."""

    def __init__(self, page: Page) -> None:
        self.sockets: list[tuple[WebSocketRoute, WebSocketRoute]] = []
        self.swallow_next: str | None = None  # a message type: the next such message is lost
        page.route_web_socket(re.compile(r"/ws/chat/$"), self._route)

    def _route(self, ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()
        self.sockets.append((ws, server))
        ws.on_message(lambda message: self._to_kgchat(ws, server, message))

    def _to_kgchat(self, ws: WebSocketRoute, server: WebSocketRoute, message: str | bytes) -> None:
        if self.swallow_next and f'"{self.swallow_next}"' in str(message):
            self.swallow_next = None
            self._close(ws, server)
            return
        server.send(message)

    @staticmethod
    def _close(ws: WebSocketRoute, server: WebSocketRoute) -> None:
        server.close(code=1012, reason="restarting")
        ws.close(code=1012, reason="restarting")

    def close(self) -> None:
        self._close(*self.sockets[-1])


@covers("PAGE /chat/", "send as the page opens")
def test_a_message_sent_the_moment_a_conversation_page_opens_is_answered(
    page: Page, world: World, model: ScriptedModel
) -> None:
    conversation_id = conversation_of(world, "ada")
    gate = f"first-load-{uuid.uuid4().hex[:8]}"
    log_in(page, world, "ada")
    # The conversation's history is held until Enter is pressed: the page is still loading then.
    held: list[Route] = []
    page.route(f"**/api/chat/conversations/{conversation_id}", lambda route: held.append(route), times=1)

    page.goto(f"{world.url}/chat/{conversation_id}/", wait_until="domcontentloaded")
    ask(page, f"#hold {gate}\nAnd the second one?")
    for _ in range(1500):  # 30 s
        if held:
            break
        page.wait_for_timeout(20)
    assert held, "the page never asked for the conversation's history"
    held[0].continue_()

    answers = page.locator("article.message-assistant")
    expect(answers).to_have_count(2)
    expect(answers.last.locator(".md")).to_have_text("Part one.")
    model.release(gate)
    expect(answers.last).to_have_attribute("data-state", "done")
    expect(answers.last.locator(".md")).to_have_text("Part one. Part two.")
    expect(page.locator("article.message-user")).to_have_count(2)
    expect(page.get_by_role("textbox", name="Message")).to_have_value("")
    page.reload()
    expect(page.locator("article.message-assistant")).to_have_count(2)
    expect(page.locator("article.message-assistant").last.locator(".md")).to_have_text("Part one. Part two.")


@covers("PAGE /chat/", "send while reconnecting")
def test_a_message_typed_while_the_server_has_closed_the_socket_is_sent_on_reconnect(
    page: Page, world: World
) -> None:
    conversation_id = conversation_of(world, "ada")
    kgchat = KgchatSide(page)
    log_in(page, world, "ada")
    page.goto(f"{world.url}/chat/{conversation_id}/")
    expect(page.locator("#connection-status")).to_have_attribute("data-state", "open")
    ask(page, "A second question?")
    expect(page.locator("article.message-assistant")).to_have_count(2)
    expect(page.locator("article.message-assistant").last).to_have_attribute("data-state", "done")

    page.context.set_offline(True)
    kgchat.close()
    expect(page.locator("#connection-status")).to_have_attribute("data-state", "closed")
    ask(page, "A third, while the connection is down?")
    expect(page.locator("article.message-user").last).to_have_text("A third, while the connection is down?")
    expect(page.locator("#connection-status")).to_have_attribute(
        "data-state", re.compile("closed|connecting")
    )
    page.context.set_offline(False)

    answers = page.locator("article.message-assistant")
    # The page retries with a backoff that grew while the network was down.
    expect(page.locator("#connection-status")).to_have_attribute("data-state", "open", timeout=20_000)
    expect(answers).to_have_count(3)
    expect(answers.last).to_have_attribute("data-state", "done")
    expect(answers.last.locator(".md")).to_have_text("Here is the answer.")
    page.reload()
    expect(page.locator("article.message-assistant")).to_have_count(3)


@covers("PAGE /chat/", "send lost in a closing socket")
def test_a_message_whose_socket_closes_before_the_server_confirms_it_is_refused_with_retry(
    page: Page, world: World
) -> None:
    conversation_id = conversation_of(world, "ada")
    kgchat = KgchatSide(page)
    log_in(page, world, "ada")
    page.goto(f"{world.url}/chat/{conversation_id}/")
    expect(page.locator("#connection-status")).to_have_attribute("data-state", "open")

    kgchat.swallow_next = "chat.message"
    ask(page, "Lost on the way?")

    refused = page.locator("article.message-assistant").last
    expect(page.locator("article.message-user").last).to_have_class(re.compile(r"\brefused\b"))
    expect(refused.locator(".turn-error-code")).to_have_text("connection_lost")
    expect(page.locator("#connection-status")).to_have_attribute("data-state", "open")
    refused.get_by_role("button", name="Retry").click()
    answers = page.locator("article.message-assistant")
    expect(answers).to_have_count(3)
    expect(answers.last).to_have_attribute("data-state", "done")
    expect(answers.last.locator(".md")).to_have_text("Here is the answer.")
    page.reload()
    expect(page.locator("article.message-user").last).to_have_text("Lost on the way?")
    expect(page.locator("article.message-assistant")).to_have_count(2)


@covers("PAGE /chat/", "decision lost in a closing socket")
def test_a_decision_whose_socket_closes_before_the_server_answers_is_offered_again(
    page: Page, world: World
) -> None:
    ada = world.api("ada")
    # A project of its own: the approved write must not change the shared world's graph, which
    # other tests count.
    project = str(ada.call("POST /api/projects", 201, json={"name": "Decisions"}).json()["id"])
    ada.call("POST /api/admin/projects/{project_id}/install-default-agents", 200, project_id=project)
    agents = ada.call("GET /api/projects/{project_id}/agent-definitions", 200, project_id=project).json()
    curator = next(a["id"] for a in agents["items"] if a["name"] == "graph-curator-agent")
    key = f"grace-hopper-{uuid.uuid4().hex[:8]}"
    proposal = {"key": key, "type": "Person", "name": "Grace Hopper"}
    paused = ada.stream(
        {
            "message": f"#tool create_entity {json.dumps(proposal)}\nPlease add Grace Hopper.",
            "projectId": project,
            "agentDefinitionId": curator,
        }
    )
    kgchat = KgchatSide(page)
    log_in(page, world, "ada")
    page.goto(f"{world.url}/chat/{paused.meta['conversationId']}/")
    expect(page.locator("#connection-status")).to_have_attribute("data-state", "open")
    card = page.locator("section.approval-card")
    approve = card.get_by_role("button", name="Approve")

    kgchat.swallow_next = "chat.approval"
    approve.click()

    expect(card.locator(".approval-status")).to_have_text(
        "Not decided: The connection closed before the server answered."
    )
    expect(page.locator("#connection-status")).to_have_attribute("data-state", "open")
    approve.click()
    expect(card).to_have_attribute("data-status", "approved")
    expect(page.locator("article.message-assistant").last).to_have_attribute("data-state", "done")
    ada.call(
        "GET /api/projects/{project_id}/graph/entities/{id_or_key}",
        200,
        project_id=project,
        id_or_key=key,
    )


# -- A document's mentions (issue #48) ----------------------------------------------------------

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
MEMOIR = (
    "# Engines\n\n"
    "Charles Babbage designed the Analytical Engine in London.\n\n"
    "Charles Babbage met Mary Somerville, who wrote <img src=x onerror=\"document.title='owned'\">.\n"
)


def name_row(page: Page, surface: str) -> Locator:
    """The row of the mentions page's table for the name spelled ``surface``."""
    return page.locator("tr.mention-name").filter(
        has=page.locator("td.surface", has_text=re.compile(f"^{surface}$"))
    )


@covers("PAGE /projects/{}/documents/{}/mentions", "upload", "names", "candidate", "entity link", "escaped")
def test_a_member_uploads_a_document_and_sees_its_mentions_linked_to_entities_or_as_candidates(
    page: Page, world: World
) -> None:
    log_in(page, world, "bob")
    with page.expect_response(re.compile(r"/agent-definitions")):
        page.get_by_label("Project", exact=True).select_option(label="Atlas")
    page.get_by_role("button", name="Documents").click()
    page.locator("#document-file").set_input_files(
        {"name": "bb-engines.md", "mimeType": "text/markdown", "buffer": MEMOIR.encode()}
    )
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("#documents-status")).to_contain_text("bb-engines.md: 3 new passage(s)")

    page.locator(".document-row", has_text="bb-engines.md").get_by_role("link", name="Mentions").click()

    expect(page.get_by_role("heading", name="Mentions in bb-engines.md")).to_be_visible()
    babbage = name_row(page, "Charles Babbage")
    expect(babbage.locator("td.passages")).to_have_text("2")
    expect(babbage.locator("a.entity-link")).to_have_text("Charles Babbage")
    somerville = name_row(page, "Mary Somerville")
    expect(somerville).to_have_attribute("data-linked", "false")
    expect(somerville.locator(".candidate")).to_have_text("candidate")
    expect(somerville.locator("td.context")).to_contain_text('who wrote <img src=x onerror="document.title=')
    expect(page).not_to_have_title("owned")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "document-mentions-desktop.png"), full_page=False)

    babbage.locator("a.entity-link").click()

    expect(page).to_have_url(re.compile(r"/chat/\?project=[0-9a-f-]{36}#entity-"))
    expect(page.locator("#side-panel-title")).to_have_text("Charles Babbage")

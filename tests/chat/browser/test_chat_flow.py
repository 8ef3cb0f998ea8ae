"""Turns in the browser: the agent's tool chips, streamed text and subgraph, stop, resume, safety.

Every model answer comes from ``LLMTestServer`` (see conftest): each test queues what the model
says, call by call: first a tool call, then the streamed answer.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, WebSocketRoute, expect

from apps.agents.models import AgentRun
from apps.chat.models import Conversation, Message
from tests.chat.browser.helpers import TEST_MODEL, World, log_in, screenshot
from tests.llm_server import LLMTestServer, Status, Stream, text_chunks, tool_call_chunks

pytestmark = pytest.mark.browser

USAGE = {"prompt_tokens": 120, "completion_tokens": 30}

# Records every status each tool chip shows, so a fast started → completed is still observed.
WATCH_CHIPS = """() => {
  window.__chipStates = [];
  new MutationObserver((records) => {
    for (const r of records) {
      const nodes = r.type === 'attributes' ? [r.target] : [...r.addedNodes];
      for (const n of nodes) {
        if (!(n instanceof Element)) continue;
        for (const chip of [n, ...n.querySelectorAll('.tool-chip')]) {
          if (chip.classList && chip.classList.contains('tool-chip')) {
            window.__chipStates.push(chip.dataset.tool + ':' + chip.dataset.status);
          }
        }
      }
    }
  }).observe(document.getElementById('messages'),
             {subtree: true, childList: true, attributes: true, attributeFilter: ['data-status']});
}"""


def send(page: Page, text: str) -> None:
    box = page.get_by_role("textbox", name="Message")
    box.fill(text)
    box.press("Enter")


def answer(page: Page, index: int = -1):  # type: ignore[no-untyped-def]
    return page.locator("article.message-assistant").nth(index)


def test_agent_chat_shows_tool_chip_streamed_text_subgraph_and_trace(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    paris = world.e["paris"]
    llm_server.enqueue(
        Stream(
            tool_call_chunks("get_entity_edges", {"entity_id": "france"}),
            finish_reason="tool_calls",
            usage=USAGE,
        ),
        Stream(
            text_chunks(
                "**France** is linked to ",
                f"[its capital](entity:{paris.id}), ",
                "Lyon and the Euro.\n\n",
                "- 3 relationships\n- 4 entities",
            ),
            usage=USAGE,
            delay=0.15,
        ),
    )
    log_in(page, live_server_url, "ada")
    page.evaluate(WATCH_CHIPS)

    send(page, "What is France connected to?")

    turn = answer(page)
    expect(turn.locator(".md strong").first).to_have_text("France")  # streamed while the turn runs
    assert turn.get_attribute("data-state") == "streaming"
    expect(turn).to_have_attribute("data-state", "done")
    chip = turn.locator(".tool-chip")
    expect(chip).to_have_count(1)
    expect(chip).to_have_attribute("data-status", "completed")
    expect(chip.locator(".tool-name")).to_have_text("get_entity_edges")
    expect(chip.locator(".tool-duration")).to_have_text(re.compile(r"\d+(\.\d)? (ms|s)"))
    states = page.evaluate("window.__chipStates")
    assert states.index("get_entity_edges:started") < states.index("get_entity_edges:completed")
    # Tool chip first, then the answer text, in the order they happened.
    kinds = turn.locator(".message-body > *").evaluate_all("els => els.map(e => e.className)")
    assert kinds == ["tool-row", "md"]
    expect(turn.locator(".md")).to_contain_text("France is linked to its capital, Lyon and the Euro.")
    expect(turn.locator(".md li")).to_have_count(2)

    conversation = Conversation.objects.get(user=world.user)
    expect(page).to_have_url(f"{live_server_url}/chat/{conversation.id}/")
    expect(page.locator("#model-badge")).to_have_text(TEST_MODEL)
    expect(turn.locator(".message-model")).to_have_text(TEST_MODEL)
    expect(page.locator(f'.conversation-item[data-conversation-id="{conversation.id}"] a')).to_have_attribute(
        "aria-current", "page"
    )

    # The subgraph: France with its three neighbours, coloured by type, labelled by name.
    graph = turn.locator(".answer-graph svg")
    expect(graph.locator(".graph-node")).to_have_count(4)
    expect(graph.locator(".graph-edge")).to_have_count(3)
    assert sorted(graph.locator(".graph-label").all_text_contents()) == ["Euro", "France", "Lyon", "Paris"]
    expect(turn.locator(".graph-legend")).to_contain_text("City")
    # Entity links: the cited one, and names of returned entities in the text.
    expect(turn.locator(f'.md a.entity-link[data-entity-id="{paris.id}"]')).to_have_text("its capital")
    expect(turn.locator(".md a.entity-mention", has_text="Lyon")).to_have_count(1)
    screenshot(page, "agent-answer-desktop.png")

    # Expanding the chip shows its input and result as JSON; the long result is folded.
    chip.locator("summary").click()
    expect(chip.locator(".tool-detail")).to_contain_text('"entity_id": "france"')
    expect(chip.locator(".tool-detail")).not_to_contain_text('"USES_CURRENCY"')
    chip.get_by_role("button", name=re.compile("Show all")).click()
    expect(chip.locator(".tool-detail")).to_contain_text('"USES_CURRENCY"')

    # A node opens the entity panel with its properties.
    graph.locator(".graph-node", has_text="Paris").click()
    panel = page.get_by_role("complementary")
    expect(panel.get_by_role("heading", name="Paris")).to_be_visible()
    expect(panel).to_contain_text("population")
    expect(panel).to_contain_text("CAPITAL_OF")
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()

    # The run trace, one click away.
    turn.get_by_role("button", name="Run trace").click()
    expect(panel.get_by_role("heading", name="Run trace")).to_be_visible()
    run = AgentRun.objects.get(conversation_id=conversation.id)
    expect(panel).to_contain_text(str(run.id))
    expect(panel.locator(".trace-call .tool-name")).to_have_text("get_entity_edges")
    expect(panel.locator(".trace-summary")).to_contain_text("Tokens in")
    expect(panel.locator(".trace-summary")).to_contain_text("240")
    expect(panel.locator(".trace-call .trace-meta")).to_have_text(re.compile(r"\d+ ms · [\d.]+ (B|KB)"))
    expect(panel.locator(".trace-step-title")).to_have_text(["Step 1", "Step 2"])
    expect(panel.locator(".trace-said")).to_contain_text(
        "**France** is linked to"
    )  # raw, as the model said it
    screenshot(page, "run-trace-desktop.png")

    # Reloaded, the persisted turn looks the same: chip, text, graph, trace.
    page.set_viewport_size({"width": 360, "height": 780})
    page.reload()
    turn = answer(page)
    expect(turn.locator(".tool-chip")).to_have_attribute("data-status", "completed")
    expect(turn.locator(".md")).to_contain_text("France is linked to its capital")
    expect(turn.locator(".answer-graph .graph-node")).to_have_count(4)
    expect(turn.get_by_role("button", name="Run trace")).to_be_visible()
    expect(page.locator("#model-badge")).to_have_text(TEST_MODEL)  # from the run: history has no model
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    screenshot(page, "agent-answer-narrow.png")


def test_stop_a_slow_answer(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    llm_server.enqueue(Stream(text_chunks(*[f"word{n} " for n in range(80)]), delay=0.2))
    log_in(page, live_server_url, "ada")

    send(page, "Tell me everything, slowly.")
    turn = answer(page)
    expect(turn.locator(".md")).to_contain_text("word2")
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    page.keyboard.press("Escape")

    expect(turn.locator(".turn-error")).to_contain_text("Stopped.")
    expect(turn).to_have_attribute("data-state", "done")
    expect(stop).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    assert "word79" not in turn.locator(".md").inner_text()


def test_reload_mid_turn_resumes_and_a_second_tab_sees_the_same_stream(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    chunks = [f"part{n:02d} " for n in range(40)]
    llm_server.enqueue(Stream(text_chunks(*chunks), delay=0.25))
    log_in(page, live_server_url, "ada")

    send(page, "Stream a long answer.")
    expect(answer(page).locator(".md")).to_contain_text("part03")
    page.reload()
    expect(answer(page)).to_have_attribute("data-state", "streaming")
    expect(answer(page).locator(".md")).to_contain_text("part00 part01")
    second = page.context.new_page()
    second.goto(page.url)
    expect(answer(second)).to_have_attribute("data-state", "streaming")

    for tab in (page, second):
        turn = answer(tab)
        expect(turn).to_have_attribute("data-state", "done", timeout=30_000)
        assert turn.locator(".md").inner_text().strip() == "".join(chunks).strip()
        expect(tab.locator("article.message-user")).to_have_count(1)
    stored = Message.objects.get(role="assistant")
    assert stored.content == "".join(chunks)
    second.close()


def test_script_in_model_output_is_shown_as_text(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    evil = "<script>window.__pwned = 1</script>"
    llm_server.enqueue(
        Stream(text_chunks("Here you go: ", evil, ' and <img src=x onerror="window.__pwned = 2">'))
    )
    log_in(page, live_server_url, "ada")

    send(page, "Say something dangerous")
    turn = answer(page)
    expect(turn).to_have_attribute("data-state", "done")

    for _ in range(2):  # live, then drawn from history after a reload
        expect(answer(page).locator(".md")).to_contain_text(evil)
        assert page.locator("#messages script, #messages img").count() == 0
        assert page.evaluate("window.__pwned") is None
        page.reload()
        expect(answer(page)).to_have_attribute("data-state", "done")


def test_model_error_is_shown_in_place_with_retry(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    llm_server.enqueue(Status(400, {"error": {"message": "the model refused"}}))
    log_in(page, live_server_url, "ada")

    send(page, "Will this work?")
    turn = answer(page)
    expect(turn.locator(".turn-error")).to_be_visible()
    expect(turn).to_have_attribute("data-state", "done")
    llm_server.enqueue(Stream(text_chunks("It works now.")))
    turn.get_by_role("button", name="Retry").click()

    expect(answer(page).locator(".md")).to_have_text("It works now.")
    expect(page.locator("article.message-user")).to_have_count(2)


def test_plain_chat_and_the_keyboard(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    llm_server.enqueue(Stream(text_chunks("Paris is the capital of France.")))
    log_in(page, live_server_url, "ada")
    page.get_by_role("radio", name=re.compile("Plain chat")).check()

    box = page.get_by_role("textbox", name="Message")
    box.press_sequentially("Line one")
    box.press("Shift+Enter")
    box.press_sequentially("line two")
    assert box.input_value() == "Line one\nline two"
    box.press("Enter")

    turn = answer(page)
    expect(turn).to_have_attribute("data-state", "done")
    expect(turn.locator(".md")).to_contain_text("Paris is the capital of France.")
    expect(box).to_have_value("")
    expect(page.locator("#agent-badge")).to_have_text("Plain chat")
    expect(turn.get_by_role("button", name="Run trace")).to_have_count(0)
    conversation = Conversation.objects.get(user=world.user)
    assert conversation.agent_definition_id is None
    assert Message.objects.get(conversation=conversation, role="user").content == "Line one\nline two"


def test_a_dropped_socket_reconnects_and_resumes_the_turn(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    chunks = [f"bit{n:02d} " for n in range(30)]
    llm_server.enqueue(Stream(text_chunks(*chunks), delay=0.2))
    sockets: list[WebSocketRoute] = []

    def through(ws: WebSocketRoute) -> None:
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket(re.compile(r"/ws/chat/$"), through)
    log_in(page, live_server_url, "ada")

    send(page, "Keep talking.")
    turn = answer(page)
    expect(turn.locator(".md")).to_contain_text("bit03")
    sockets[-1].close(code=4000, reason="network trouble")

    expect(page.locator("#connection-status")).to_have_attribute("data-state", "closed")
    expect(page.locator("#connection-status")).to_have_attribute("data-state", "open")
    expect(turn).to_have_attribute("data-state", "done", timeout=30_000)
    assert len(sockets) == 2
    assert turn.locator(".md").inner_text().strip() == "".join(chunks).strip()


def open_watching(tab: Page, url: str) -> None:
    """Open ``url`` in ``tab`` and wait until its socket watches the conversation on screen.

    The socket is routed through the test: right after the page's ``chat.subscribe`` it sends a
    ``chat.cancel`` of its own. The server handles a socket's messages in order, so its answer
    (``not_running``, kept from the page) means the subscription, and the watch, are in place.
    """
    conversation_id = url.rstrip("/").rsplit("/", 1)[-1]
    barrier: list[str] = []

    def through(ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()

        def from_page(message: str | bytes) -> None:
            server.send(message)
            if isinstance(message, str) and '"chat.subscribe"' in message:
                server.send(json.dumps({"type": "chat.cancel", "conversationId": conversation_id}))

        def from_server(message: str | bytes) -> None:
            if isinstance(message, str) and '"not_running"' in message and not barrier:
                barrier.append(message)
                return
            ws.send(message)

        ws.on_message(from_page)
        server.on_message(from_server)

    tab.route_web_socket(re.compile(r"/ws/chat/$"), through)
    tab.goto(url)
    for _ in range(300):
        if barrier:
            return
        tab.wait_for_timeout(50)
    raise AssertionError("the second tab's socket never confirmed its subscription")


def test_a_message_sent_in_one_tab_appears_in_another_tab_on_the_conversation_and_its_answer_streams(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    llm_server.enqueue(Stream(text_chunks("Paris is on the Seine.")))
    log_in(page, live_server_url, "ada")
    send(page, "Where is Paris?")
    expect(answer(page)).to_have_attribute("data-state", "done")
    other = page.context.new_page()
    open_watching(other, page.url)
    expect(answer(other).locator(".md")).to_have_text("Paris is on the Seine.")
    # From now on the other tab cannot read the conversation over REST: what it shows came over its socket.
    conversation_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    other.route(f"**/api/chat/conversations/{conversation_id}", lambda route: route.abort())
    chunks = [f"step{n:02d} " for n in range(20)]
    llm_server.enqueue(Stream(text_chunks(*chunks), delay=0.15))

    send(page, "And Lyon?")

    expect(other.locator("article.message-user")).to_have_count(2)
    expect(other.locator("article.message-user").last).to_have_text("And Lyon?")
    expect(answer(other)).to_have_attribute("data-state", "streaming")
    expect(other.get_by_role("button", name="Stop")).to_be_visible()
    expect(answer(other)).to_have_attribute("data-state", "done", timeout=30_000)
    assert answer(other).locator(".md").inner_text().strip() == "".join(chunks).strip()
    expect(other.get_by_role("button", name="Send")).to_be_visible()
    expect(page.locator("article.message-user")).to_have_count(2)
    other.close()


def test_a_message_sent_while_another_tabs_turn_starts_is_refused_and_that_turn_stays_the_other_tabs(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    """Two tabs send at once: the other tab's turn_started arrives, then mine is sent before that
    turn's meta. The meta is not bound to my pending message (it belongs to the message drawn from
    turn_started); mine is refused (turn_in_progress) while that turn streams on, Stop still shown."""
    llm_server.enqueue(Stream(text_chunks("Paris is on the Seine.")))
    log_in(page, live_server_url, "ada")
    send(page, "Where is Paris?")
    expect(answer(page)).to_have_attribute("data-state", "done")
    conversation_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    other = page.context.new_page()
    watching: list[str] = []
    held: list[str | bytes] = []
    holding: list[bool] = []

    def through(ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()

        def from_page(message: str | bytes) -> None:
            server.send(message)
            if isinstance(message, str) and '"chat.subscribe"' in message:
                server.send(json.dumps({"type": "chat.cancel", "conversationId": conversation_id}))
            if isinstance(message, str) and '"chat.message"' in message and holding:
                # My message is on its way: now let the other turn's frames through.
                holding.clear()
                for frame in held:
                    ws.send(frame)
                held.clear()

        def from_server(message: str | bytes) -> None:
            if isinstance(message, str) and '"not_running"' in message and not watching:
                watching.append(message)
                return
            if holding:
                held.append(message)
                return
            ws.send(message)
            if isinstance(message, str) and '"turn_started"' in message:
                holding.append(True)

        ws.on_message(from_page)
        server.on_message(from_server)

    other.route_web_socket(re.compile(r"/ws/chat/$"), through)
    other.goto(page.url)
    expect(answer(other).locator(".md")).to_have_text("Paris is on the Seine.")
    for _ in range(300):
        if watching:
            break
        other.wait_for_timeout(50)
    assert watching, "the other tab's socket never confirmed its subscription"
    chunks = [f"part{n:02d} " for n in range(16)]
    llm_server.enqueue(Stream(text_chunks(*chunks), delay=0.2))

    send(page, "And Lyon?")
    expect(other.locator("article.message-user")).to_have_count(2)
    expect(other.locator("article.message-user").last).to_have_text("And Lyon?")
    send(other, "Mine too")

    expect(other.locator("article.message-user.refused")).to_have_text("Mine too")
    expect(answer(other)).to_have_attribute("data-state", "streaming")
    expect(other.get_by_role("button", name="Stop")).to_be_visible()
    expect(answer(other)).to_have_attribute("data-state", "done", timeout=30_000)
    assert answer(other).locator(".md").inner_text().strip() == "".join(chunks).strip()
    lyon = other.locator("article.message-user", has_text="And Lyon?")
    stored = Message.objects.filter(conversation_id=conversation_id, role="user", content="And Lyon?").get()
    expect(lyon).to_have_attribute("data-message-id", str(stored.id))
    assert not Message.objects.filter(conversation_id=conversation_id, content="Mine too").exists()
    other.close()

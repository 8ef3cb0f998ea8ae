"""A thread of the OpenAI-compatible endpoint ``/v1`` (docs/protocol.md §8) is a kgchat
conversation like any other, on kgchat's own page (issue #50's "Done means"): the official
``openai`` package streams an agent's cited answer and a follow-up in the same thread, and the
token's user then finds that conversation in the page's sidebar in Debian's chromium, with both
questions, both answers, the tool chip and the citation as a link that opens the entity."""

from __future__ import annotations

import pytest
from openai import OpenAI
from playwright.sync_api import Page, expect

from tests.blackbox.covers import covers
from tests.blackbox.server import Kgchat
from tests.blackbox.test_browser import SCREENSHOTS, log_in, page  # noqa: F401 - page is a fixture
from tests.blackbox.test_openai_api import THREAD, client
from tests.blackbox.world import World

pytestmark = pytest.mark.browser

QUESTION = '#tool get_entity_edges {"entity_id": "ada-lovelace"}\nWho did Ada Lovelace work with, via /v1?'
FOLLOW_UP = "And what did they build together?"


@pytest.fixture(scope="module")
def token(kgchat: Kgchat, world: World) -> str:
    """ada's token for Atlas, as Open WebUI or LibreChat would be given it."""
    return kgchat.manage("create_api_token", "ada", "--project", "atlas", "--name", "v1-page").strip()


def streamed(openai_client: OpenAI, messages: list[dict[str, str]]) -> tuple[str, str]:
    """One streamed turn of ``atlas/graph-query-agent``: its text and its conversation's id."""
    raw = openai_client.chat.completions.with_raw_response.create(
        model="atlas/graph-query-agent", messages=messages, stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    return text, raw.headers[THREAD]


@covers("PAGE /chat/", "a /v1 thread")
def test_a_v1_thread_streamed_by_the_openai_package_is_a_conversation_on_kgchats_page_with_its_citation(
    page: Page,  # noqa: F811 - the fixture of test_browser.py
    world: World,
    token: str,
) -> None:
    openai_client = client(world, token)
    first, conversation = streamed(openai_client, [{"role": "user", "content": QUESTION}])
    second, same = streamed(
        openai_client,
        [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": first},
            {"role": "user", "content": FOLLOW_UP},
        ],
    )
    ada = world.entities["ada-lovelace"]
    link = f"{world.url}/chat/{conversation}/#entity-{ada}"
    assert first == f"Found [Ada Lovelace]({link})."
    assert (second, same) == ("Here is the answer.", conversation)

    log_in(page, world, "ada")
    page.goto(f"{world.url}/chat/?project={world.project_id}")
    expect(page.locator("body[data-ready='true']")).to_be_attached()
    page.locator(f'.conversation-item[data-conversation-id="{conversation}"] a.conversation-link').click()

    expect(page).to_have_url(f"{world.url}/chat/{conversation}/")
    questions = page.locator("article.message-user")
    answers = page.locator("article.message-assistant")
    expect(questions).to_have_count(2)
    expect(questions.first).to_contain_text("Who did Ada Lovelace work with, via /v1?")
    expect(questions.last).to_contain_text(FOLLOW_UP)
    expect(answers).to_have_count(2)
    expect(answers.first.locator(".tool-chip .tool-name")).to_have_text("get_entity_edges")
    expect(answers.first.locator(".md")).to_have_text("Found Ada Lovelace.")
    citation = answers.first.locator(".md a.entity-link")
    expect(citation).to_have_text("Ada Lovelace")
    expect(citation).to_have_attribute("data-entity-id", ada)
    expect(answers.first.locator(".citations a.entity-link")).to_have_text("Ada Lovelace")
    expect(answers.last.locator(".md")).to_have_text("Here is the answer.")
    page.set_viewport_size({"width": 1280, "height": 1100})  # the whole thread in the screenshot
    questions.first.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "v1-openai-thread-desktop.png"), full_page=False)

    citation.click()
    expect(page.locator("#side-panel-title")).to_have_text("Ada Lovelace")

    # The link the openai client was given opens that conversation with the entity's panel open.
    linked = page.context.new_page()
    linked.goto(link)
    expect(linked.locator("#conversation-title")).not_to_have_text("New chat")
    expect(linked.locator("article.message-assistant")).to_have_count(2)
    expect(linked.locator("#side-panel-title")).to_have_text("Ada Lovelace")

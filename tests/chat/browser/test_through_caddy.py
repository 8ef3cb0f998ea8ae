"""The chat page in Chromium through the production topology (issue #16 item 5): Caddy in front
of two daphne processes on production settings (``tests.support.production_topology``).

The browser logs in with the form, loads the page's CSS and JavaScript from Caddy (the app
processes do not serve ``/static/`` in production), opens the websocket through Caddy and
streams an answer from the test model.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, Response, WebSocket, expect

from apps.chat.models import Message
from tests.chat.browser.helpers import PASSWORD, TEST_MODEL, World, log_in
from tests.chat.browser.test_chat_flow import answer, send
from tests.chat.streams.test_multiprocess import _database_url
from tests.llm_server import LLMTestServer, Stream, text_chunks
from tests.support.production_topology import (
    CADDY,
    CADDY_MISSING,
    Topology,
    production_topology,
    set_production_password,
)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(CADDY is None, reason=CADDY_MISSING)]


@pytest.fixture(scope="module")
def topology(django_db_setup: None, django_db_blocker: Any, llm_server: LLMTestServer) -> Iterator[Topology]:
    with django_db_blocker.unblock():
        database_url = _database_url()
    with production_topology(
        database_url=database_url, model=TEST_MODEL, llm_base_url=llm_server.base_url
    ) as t:
        yield t


def test_the_chat_page_through_caddy_logs_in_loads_static_files_from_caddy_and_streams_an_answer(
    page: Page, topology: Topology, world: World, llm_server: LLMTestServer
) -> None:
    set_production_password(world.user, PASSWORD)
    static: list[Response] = []
    sockets: list[WebSocket] = []
    page.on("response", lambda r: static.append(r) if "/static/" in r.url else None)
    page.on("websocket", lambda ws: sockets.append(ws))
    llm_server.enqueue(Stream(text_chunks("Paris ", "is the capital ", "of France."), delay=0.1))
    log_in(page, topology.http, "ada")

    send(page, "What is the capital of France?")

    turn = answer(page)
    expect(turn.get_by_role("button", name="Good answer")).to_be_visible()  # shown once the turn is done
    expect(turn.locator(".md")).to_have_text("Paris is the capital of France.")
    assert {r.url.rsplit("/", 1)[-1] for r in static} >= {"chat.css", "chat.js"}
    # "Caddy" alone: Caddy's file server answered (a proxied answer says "Caddy, daphne"); 304
    # when the next page revalidates what the login page loaded.
    assert {r.headers.get("server") for r in static} == {"Caddy"}
    assert {r.status for r in static} <= {200, 304}
    assert [s.url for s in sockets] == [f"{topology.ws}"]
    stored = Message.objects.get(conversation__project=world.project, role="assistant")
    assert stored.content == "Paris is the capital of France."

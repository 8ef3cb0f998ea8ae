"""Browser tests: Debian's chromium driven by Playwright against daphne on the test database.

daphne runs in a forked process (``daphne.testing.DaphneProcess``, as Channels' live server test
case does) and serves the real ASGI application: pages, static files, REST and the websocket.
The model is the one thing replaced: every turn is forced onto ``openai/test-model`` served by
``tests.llm_server.LLMTestServer``, a local OpenAI-compatible server whose answers each test
queues. Test data is committed (``transactional_db``) so the server process sees it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from channels.testing.live import make_application, set_database_connection
from daphne.testing import DaphneProcess
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from playwright.sync_api import Browser, Page, expect, sync_playwright

from apps.agents.models import AgentDefinition
from tests.chat.browser.helpers import CHROMIUM, CHROMIUM_ARGS, TEST_MODEL, World
from tests.factories import make_entity, make_project, make_relationship, make_user
from tests.llm_server import LLMTestServer
from tests.support.forked_server import close_database_pools

expect.set_options(timeout=15_000)


@pytest.fixture(autouse=True)
def _close_connections_of_async_threads() -> Iterator[None]:
    """Replace the root conftest's async fixture: Playwright's sync API owns this thread's loop."""
    yield


# The browser tests' server and its model live as long as this package's tests, not the session:
# like every kgchat process, the server takes over turns whose lease lapsed in its database (issue
# #27), and the tests after these (processes killed on purpose) must meet only their own processes.
@pytest.fixture(scope="package")
def llm_server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _empty_llm_queue(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "llm_server" in request.fixturenames:
        server: LLMTestServer = request.getfixturevalue("llm_server")
        with server._lock:
            server.plans.clear()


def _server_setup() -> None:
    """In the server process: use the test database and report server errors on stderr."""
    import logging
    import sys

    from tests.support.forked_server import reset_thread_executors_after_fork

    reset_thread_executors_after_fork()
    set_database_connection()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[daphne] %(levelname)s %(name)s: %(message)s"))
    for name in ("django.request", "kgchat", "apps"):
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.WARNING)


@pytest.fixture(scope="package")
def live_server_url(
    django_db_setup: None, django_db_blocker: Any, llm_server: LLMTestServer
) -> Iterator[str]:
    """daphne serving the app on the test database, every model forced onto the test server."""
    from django.conf import settings

    forced = {
        "KGCHAT_MODEL": TEST_MODEL,
        "OPENAI_BASE_URL": llm_server.base_url,
        "OPENAI_API_KEY": "test-key",
    }
    previous = {name: getattr(settings, name) for name in forced}
    for name, value in forced.items():
        setattr(settings, name, value)
    # Fork while database access is unblocked: the server process inherits pytest-django's blocker.
    with django_db_blocker.unblock():
        close_database_pools()
        process = DaphneProcess(
            "127.0.0.1",
            partial(make_application, static_wrapper=ASGIStaticFilesHandler),
            setup=_server_setup,
        )
        process.start()
    # The forked server keeps its own copy; this process (and the tests after) gets its own back.
    for name, value in previous.items():
        setattr(settings, name, value)
    if not process.ready.wait(timeout=60):
        process.terminate()
        raise RuntimeError("daphne did not start")
    try:
        yield f"http://127.0.0.1:{process.port.value}"
    finally:
        process.terminate()
        process.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium for one test module. Playwright's sync API keeps an event loop running in this
    thread while it is started, so it is stopped after each module (the rest of the suite has async
    tests), and only meanwhile may the tests' own synchronous ORM calls run beside that loop."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run scripts/system_deps.sh (make test does)")
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    if "transactional_db" in request.fixturenames:
        # The database first, so the page is closed before it is flushed: a page still loading
        # (the chat page right after a log-in) reads tables the flush's TRUNCATE locks, and the two
        # deadlocked once in CI, leaving the test's user for the next test.
        request.getfixturevalue("transactional_db")
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def world(transactional_db: None) -> Iterator[World]:
    user = make_user("ada")
    project = make_project(owner=user, name="Atlas")
    e = {
        "france": make_entity(
            project, "france", type="Country", name="France", description="A country in Europe"
        ),
        "paris": make_entity(
            project,
            "paris",
            type="City",
            name="Paris",
            description="Capital of France",
            properties={"population": 2_100_000},
        ),
        "lyon": make_entity(project, "lyon", type="City", name="Lyon", description="A city on the Rhône"),
        "euro": make_entity(project, "euro", type="Currency", name="Euro", description="The euro"),
    }
    make_relationship(project, e["paris"], "CAPITAL_OF", e["france"])
    make_relationship(project, e["lyon"], "LOCATED_IN", e["france"])
    make_relationship(project, e["france"], "USES_CURRENCY", e["euro"])
    agent = AgentDefinition.objects.create(
        project=project,
        name="graph-query-agent",
        description="Answers questions by calling the graph tools.",
        system_prompt="You answer questions about the knowledge graph using the tools.",
        model={"name": TEST_MODEL, "temperature": 0.1},
        tools=["get_entity_edges", "traverse_graph", "hybrid_search", "search_entities"],
        is_default=True,
        max_steps=6,
    )
    yield World(user=user, project=project, agent=agent, e=e)
    _wait_until_the_server_is_idle()


def _wait_until_the_server_is_idle(seconds: float = 20.0) -> None:
    """Let the server finish the turns a test left running before the database is flushed.

    A test may end while the server is still storing a turn (a stopped answer, a reload); the
    flush's TRUNCATE and that transaction would otherwise deadlock, leaving data for the next test.
    """
    import time

    from apps.agents.models import AgentRun, RunStatus
    from apps.chat.models import Conversation

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        busy = (
            Conversation.objects.filter(active_turn_id__isnull=False).exists()
            or AgentRun.objects.filter(status=RunStatus.RUNNING).exists()
        )
        if not busy:
            return
        time.sleep(0.1)

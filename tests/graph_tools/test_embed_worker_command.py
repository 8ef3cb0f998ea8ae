"""``manage.py embed_worker --processes N``: several model processes share the pending queue (issue 16 item 1)."""

from __future__ import annotations

import os
import signal
import threading
import time
from io import StringIO

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection

from apps.graph_tools.embedders import get_embedder
from apps.graph_tools.models import GraphObject, GraphObjectEmbedding
from tests.factories import make_entity, make_project

pytestmark = pytest.mark.django_db(transaction=True)


def _stop_when_nothing_is_pending(project_id: object, params: dict, stopped: threading.Event) -> None:
    """Send this process SIGTERM (the worker's stop signal) once the project has no pending entity."""
    deadline = time.monotonic() + 600  # a guard against a hung worker, not a performance bound
    with psycopg.connect(**params, autocommit=True) as conn:
        while time.monotonic() < deadline:
            (pending,) = conn.execute(
                "SELECT count(*) FROM kb.graph_objects WHERE project_id = %s AND embedding_pending",
                [project_id],
            ).fetchone()
            if pending == 0:
                break
            time.sleep(0.2)
    stopped.set()
    os.kill(os.getpid(), signal.SIGTERM)


def test_two_worker_processes_embed_every_pending_entity_and_stop_on_sigterm():
    project = make_project()
    for i in range(150):
        make_entity(project, f"e{i}", name=f"Entity {i}", description=f"Description number {i} of a thing.")
    stopped = threading.Event()
    watcher = threading.Thread(
        target=_stop_when_nothing_is_pending,
        args=(project.id, connection.get_connection_params(), stopped),
        daemon=True,
    )
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    err = StringIO()
    watcher.start()

    try:
        call_command("embed_worker", "--processes", "2", "--nice", "0", "--idle-seconds", "0.2", stderr=err)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    watcher.join()

    assert stopped.is_set()
    assert "2 process(es)" in err.getvalue() and "stopped (2 processes)" in err.getvalue()
    vectors = GraphObjectEmbedding.objects.filter(project=project)
    assert vectors.values("object_id").distinct().count() == 150
    assert set(vectors.values_list("model", flat=True)) == {get_embedder().name}
    assert not GraphObject.objects.filter(project=project, embedding_pending=True).exists()

"""The one background worker (``manage.py embed_worker``; ``make run`` starts one): its loop, and the
steps each app registers in it at start-up, in its ``AppConfig.ready``. Nothing here knows what the
steps do; no other service is needed (the queues are rows, claimed with ``FOR UPDATE SKIP LOCKED``).

Two kinds of step:

- a **batch step** (``batch_step_register``) embeds a batch of the rows that wait for a vector, with
  the worker's embedder (``step(embedder=…, batch_size=…, project_id=…)``, ``project_id`` None: every
  project), and says how many it did. In each round the batch steps run in the order they were
  registered until one finds work: entities first (``GraphToolsConfig``), then passages
  (``DocumentsConfig``). A failure is the round's (logged, retried after the pause).
- a **job step** (``job_step_register``) does one unit of other work and says how much: document
  extraction (``DocumentsConfig``). Each runs once a round after the batch, so a large import's
  backlog of vectors does not hold up extraction, nor extraction the vectors; a failing one is
  logged and the others go on. A worker limited to one project runs none.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

from django.db import connection

log = logging.getLogger("kgchat.jobs")

BatchStep = Callable[..., int]
JobStep = Callable[[], int]
_BATCH_STEPS: dict[str, BatchStep] = {}
_JOB_STEPS: dict[str, JobStep] = {}


def batch_step_register(name: str, step: BatchStep) -> None:
    """Run ``step`` in each round of the worker when no batch step registered before it found work."""
    _BATCH_STEPS[name] = step


def job_step_register(name: str, step: JobStep) -> None:
    """Run ``step`` once in each round of the worker, after the batch."""
    _JOB_STEPS[name] = step


def batch_steps_run(*, project_id: uuid.UUID | None = None, **arguments: Any) -> int:
    """Run the batch steps in order until one does something; return how much it did."""
    for step in list(_BATCH_STEPS.values()):
        done = step(project_id=project_id, **arguments)
        if done:
            return done
    return 0


def job_steps_run() -> int:
    """Run every job step once; return how much work they did. A failing step is logged."""
    done = 0
    for name, step in list(_JOB_STEPS.items()):
        try:
            done += step()
        except Exception:
            log.exception("background job %s failed; retrying on the next round", name)
            connection.close()
    return done


def worker_run(
    *,
    stop: threading.Event,
    idle_seconds: float = 2.0,
    on_batch: Callable[[int], None] | None = None,
    project_id: uuid.UUID | None = None,
    **arguments: Any,
) -> None:
    """Round after round until ``stop`` is set: one batch (``batch_steps_run`` with ``arguments``,
    the embedder and batch size) and one step of each job; poll every ``idle_seconds`` while nothing
    waits. A failing round (the model of a batch step) is logged and retried after the same pause.
    With ``project_id``: only that project's batches, and no job (a one-off backfill or a benchmark
    beside the regular worker). ``on_batch`` is told how much each round did."""
    while not stop.is_set():
        try:
            done = batch_steps_run(project_id=project_id, **arguments)
            if project_id is None:
                done += job_steps_run()
        except Exception:
            log.exception("the background worker's round failed; retrying in %.0f s", idle_seconds)
            done = 0
            connection.close()
        if on_batch is not None and done:
            on_batch(done)
        if not done:
            stop.wait(idle_seconds)

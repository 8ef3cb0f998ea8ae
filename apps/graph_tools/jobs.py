"""The one background worker's other jobs: steps that layers above register at start-up.

``manage.py embed_worker`` embeds the entities that wait for a vector, then (when none does) the
other rows an app registered a vector step for (``vector_step_register``: the documents app's
passages), and runs each registered job step once (a step does one unit of work and says how many it did). The agents app
registers document extraction here (it needs a model, which only agents may call), so embedding
and extraction share one worker, one queue discipline (rows claimed with ``FOR UPDATE SKIP
LOCKED``) and one way to stop and resume.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from django.db import connection

log = logging.getLogger("kgchat.jobs")

JobStep = Callable[[], int]
_STEPS: dict[str, JobStep] = {}


def job_step_register(name: str, step: JobStep) -> None:
    """Run ``step`` in the background worker whenever nothing waits for a vector."""
    _STEPS[name] = step


def job_steps_run() -> int:
    """Run every registered step once; return how much work they did. A failing step is logged."""
    done = 0
    for name, step in list(_STEPS.items()):
        try:
            done += step()
        except Exception:
            log.exception("background job %s failed; retrying on the next round", name)
            connection.close()
    return done


# A vector step embeds one batch of its rows waiting for a vector with the worker's embedder:
# ``step(embedder=…, batch_size=…, project_id=…)`` (``project_id`` None: every project) returns how
# many it embedded. A failure is the worker's to log and retry (``embeddings.embed_worker_run``).
VectorStep = Callable[..., int]
_VECTOR_STEPS: dict[str, VectorStep] = {}


def vector_step_register(name: str, step: VectorStep) -> None:
    """Embed ``step``'s rows in the background worker when no entity waits for a vector."""
    _VECTOR_STEPS[name] = step


def vector_steps_run(*, embedder: Any, batch_size: int, project_id: uuid.UUID | None) -> int:
    """Run the registered vector steps in order until one embeds something; return how many it did."""
    for step in list(_VECTOR_STEPS.values()):
        done = step(embedder=embedder, batch_size=batch_size, project_id=project_id)
        if done:
            return done
    return 0

"""The one background worker's other jobs: steps that layers above register at start-up.

``manage.py embed_worker`` embeds what waits for a vector and, when nothing does, runs each
registered step once (a step does one unit of work and says how many it did). The agents app
registers document extraction here (it needs a model, which only agents may call), so embedding
and extraction share one worker, one queue discipline (rows claimed with ``FOR UPDATE SKIP
LOCKED``) and one way to stop and resume.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

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

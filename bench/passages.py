"""Documents at scale (issue #48): mention indexing throughput, ``search_passages`` p50/p95 at
growing corpora, and the mention index's size per passage.

A generated corpus: documents of ``PER_DOCUMENT`` paragraphs, each naming a few people, places and
works drawn with a Zipf-like skew from a pool that grows with the corpus (so a name is mentioned by
a few passages, a common one by thousands), uploaded through the real upload path
(``document_upload``: parse, split, store, index mentions) into a throw-away project, deleted at
the end. Questions name one or two of the pool's names. Search is full text and the walk over the
mention index (no vectors: embedding 100k passages on 2 cores takes half an hour; the vector
branch is one HNSW index scan, measured by ``bench.graph_tools`` for entities).

    BENCH_PASSAGES=1000,10000,100000 python -m bench passages
"""

from __future__ import annotations

import os
import random
import statistics
import time
import uuid

from django.contrib.auth import get_user_model
from django.db import connection

from apps.documents.search import passages_search
from apps.documents.services import document_upload
from apps.graph_tools.recognizer import mentions_find
from apps.projects.services import project_create

SIZES = [int(n) for n in os.environ.get("BENCH_PASSAGES", "1000,10000,100000").split(",")]
PER_DOCUMENT = 100
QUERIES = int(os.environ.get("BENCH_QUERIES", "100"))
SYLLABLES = ["ka", "ren", "to", "mi", "sel", "va", "dor", "lin", "qu", "bar", "es", "ol", "tin", "gra", "hu"]
TEMPLATES = [
    "{a} was born in {p} and directed {w} with {b}.",
    "{w} is a film by {a}, set in {p}; {b} wrote its music.",
    'In {p}, {a} met {b}, whose "{w}" was published on 12 March 1950.',
    "{a} married {b} in {p}. Their son studied {w} at the University of {q}.",
]


def _name(rng: random.Random, words: int) -> str:
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(3)).title() for _ in range(words))


def _paragraph(rng: random.Random, pool: list[str]) -> str:
    pick = [
        pool[min(len(pool) - 1, int(rng.paretovariate(1.2)) - 1 + rng.randrange(len(pool) // 2))]
        for _ in range(5)
    ]
    return rng.choice(TEMPLATES).format(a=pick[0], b=pick[1], p=pick[2], w=pick[3], q=pick[4])


def _fill(project, have: int, want: int, pool: list[str], rng: random.Random) -> float:
    """Upload documents of ``PER_DOCUMENT`` paragraphs until the project holds ``want`` passages;
    the seconds it took."""
    started = time.perf_counter()
    while have < want:
        text = "\n\n".join(_paragraph(rng, pool) for _ in range(PER_DOCUMENT))
        document_upload(project=project, name=f"bench-{have}.txt", data=text.encode())
        have += PER_DOCUMENT
    return time.perf_counter() - started


def _index_size(project_id: uuid.UUID) -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT pg_total_relation_size('kb.passage_mentions') + pg_total_relation_size('kb.mention_names'),
                      (SELECT count(*) FROM kb.passage_mentions WHERE project_id = %s)""",
            [project_id],
        )
        size, mentions = cursor.fetchone()
    return int(size), int(mentions)


def run() -> None:
    rng = random.Random(48)
    tag = uuid.uuid4().hex[:8]
    owner = get_user_model().objects.create_user(f"bench-passages-{tag}")
    project = project_create(owner=owner, name=f"bench passages {tag}")
    text = "\n".join(_paragraph(rng, [_name(rng, 2) for _ in range(500)]) for _ in range(2000))
    started = time.perf_counter()
    found = mentions_find(text)
    seconds = time.perf_counter() - started
    print(
        f"recognizer alone: 2000 paragraphs, {len(found)} mentions in {seconds * 1000:.0f} ms "
        f"({2000 / seconds:.0f} passages/s)",
        flush=True,
    )
    try:
        have = 0
        pool: list[str] = []
        for size in SIZES:
            pool += [_name(rng, rng.choice((1, 2, 2, 3))) for _ in range(max(50, size // 4 - len(pool)))]
            seconds = _fill(project, have, size, pool, rng)
            added = size - have
            have = size
            with connection.cursor() as cursor:
                cursor.execute(
                    "ANALYZE kb.passage_mentions; ANALYZE kb.mention_names; ANALYZE kb.document_passages"
                )
            size_bytes, mentions = _index_size(project.id)
            times = []
            walked = 0
            for _ in range(QUERIES):
                a, b = rng.choice(pool), rng.choice(pool)
                query = f"Where was the director of {a} born, and did {b} know them?"
                began = time.perf_counter()
                results = passages_search(project_id=project.id, query=query, limit=5)
                times.append((time.perf_counter() - began) * 1000)
                walked += any(r["mentions"] for r in results)
            times.sort()
            print(
                f"{size:>7} passages: uploaded and mention-indexed {added} in {seconds:.1f} s "
                f"({added / seconds:.0f} passages/s); {mentions / size:.1f} mentions and "
                f"{size_bytes / size:.0f} bytes of index a passage (both tables, all projects); "
                f"search_passages (full text + walk) p50 {statistics.median(times):.1f} ms, "
                f"p95 {times[int(len(times) * 0.95) - 1]:.1f} ms; {walked}/{QUERIES} queries walked",
                flush=True,
            )
    finally:
        project.delete()
        owner.delete()

"""The queue ``duplicates`` (#51): pairs of entities that may be one, each with its evidence and
the merge a member may propose in one click.

The walk goes through the project's entities in key order (``queues.py``), a chunk at a
time and at most ``SEEDS_MAX`` a page. For each entity (the *seed*) at most ``PER_SEED`` candidates
of each kind are found through an index, never a scan, and only among the entities after it in
key order (so a pair is listed once):

- the same name, case aside (the ``lower(name)`` index);
- a name one of the other's aliases holds (the aliases' partial GIN index, both ways);
- a similar name: pg_trgm's ``%`` at similarity ``TRIGRAM_MIN`` (the names' GIN trigram index:
  a join, not a ``LIMIT`` under the seed, which the planner would serve by walking the key index
  and testing every name after the seed's);
- a near vector of the configured embedding model (its HNSW index), at cosine ``COSINE_MIN``.

Each pair is then measured: name equality, alias, trigram similarity, cosine similarity, the
neighbours the two share (of their first ``NEIGHBOURS_MAX`` each) and their relationship counts
(up to ``DEGREE_MAX``). ``score`` = 0.5 x name (1 for the same name or an alias, else the trigram
similarity) + 0.3 x cosine (0 without vectors) + 0.2 x min(1, shared neighbours / 3): it orders
the pairs of one seed; pages are in seed order, not best pair first over the whole graph (that
needs every pair scored ahead, which a bounded page cannot). The thresholds are extraction's own
(``documents.resolution``: a mention that close to an entity is proposed as a merge).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connection, transaction

from apps.curation.queues import LIMIT_MAX, Cursor, QueuePage
from apps.curation.selectors import merges_pending
from apps.documents.resolution import EMBEDDING_MERGE, TRIGRAM_MERGE
from apps.graph_tools.embedders import Embedder, get_embedder
from apps.graph_tools.search import vector_search_options_set

SEEDS_CHUNK = 50
SEEDS_MAX = 100
PER_SEED = 5
NEIGHBOURS_MAX = 200
DEGREE_MAX = 1000
TRIGRAM_MIN = TRIGRAM_MERGE
COSINE_MIN = EMBEDDING_MERGE
# The HNSW search's breadth for a seed's few nearest vectors.
EF_SEARCH = 40


def _seeds(project_id: uuid.UUID, after: str, inclusive: bool, count: int) -> list[tuple[uuid.UUID, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT o.id, o.key FROM kb.graph_objects o
                WHERE o.project_id = %s AND o.key {">=" if inclusive else ">"} %s ORDER BY o.key LIMIT %s""",
            [project_id, after, count],
        )
        return [(r[0], r[1]) for r in cursor.fetchall()]


def _neighbours(entity: str) -> str:
    return f"""(SELECT r.dst_id FROM kb.graph_relationships r WHERE r.src_id = {entity} LIMIT {NEIGHBOURS_MAX})
               UNION (SELECT r.src_id FROM kb.graph_relationships r WHERE r.dst_id = {entity}
                      LIMIT {NEIGHBOURS_MAX})"""


def _degree(entity: str) -> str:
    return f"""(SELECT count(*) FROM (
                  (SELECT 1 FROM kb.graph_relationships r WHERE r.src_id = {entity} LIMIT {DEGREE_MAX})
                  UNION ALL (SELECT 1 FROM kb.graph_relationships r WHERE r.dst_id = {entity}
                             LIMIT {DEGREE_MAX})) d)"""


def _candidates_sql(dim: int) -> str:
    """The candidates of the seeds ``%(seeds)s``: (seed id, candidate id) rows."""
    vec = f"::vector({dim})"
    near = f"""
        (SELECT n.object_id FROM kb.graph_object_embeddings e1 CROSS JOIN LATERAL (
             SELECT e2.object_id FROM kb.graph_object_embeddings e2
             WHERE e2.project_id = %(p)s AND e2.model = %(model)s
             ORDER BY e2.embedding{vec} <=> e1.embedding{vec} LIMIT {PER_SEED + 1}) n
         WHERE e1.object_id = s.id AND e1.model = %(model)s)"""
    candidates = f"""
        SELECT DISTINCT s.id AS a, c.id AS b FROM kb.graph_objects s CROSS JOIN LATERAL (
            (SELECT o.id FROM kb.graph_objects o WHERE o.project_id = %(p)s
               AND lower(o.name) = lower(s.name) AND o.key > s.key LIMIT {PER_SEED})
            UNION ALL
            (SELECT o.id FROM kb.graph_objects o WHERE o.project_id = %(p)s
               AND o.properties ? 'aliases' AND kb.entity_aliases(o.properties) && ARRAY[lower(s.name)]
               AND o.key > s.key LIMIT {PER_SEED})
            UNION ALL
            (SELECT o.id FROM kb.graph_objects o WHERE o.project_id = %(p)s
               AND lower(o.name) = ANY(kb.entity_aliases(s.properties)) AND o.key > s.key LIMIT {PER_SEED})
            UNION ALL {near}
        ) c(id)
        WHERE s.id = ANY(%(seeds)s) AND c.id <> s.id
        UNION
        SELECT t.a, t.b FROM (
            SELECT s.id AS a, o.id AS b, row_number() OVER (
                       PARTITION BY s.id ORDER BY similarity(o.name, s.name) DESC, o.key) AS n
            FROM kb.graph_objects s JOIN kb.graph_objects o
              ON o.project_id = %(p)s AND o.name %% s.name AND o.key > s.key AND o.id <> s.id
            WHERE s.id = ANY(%(seeds)s)) t
        WHERE t.n <= {PER_SEED}"""
    return candidates


def _measures_sql(dim: int) -> str:
    """The measures of the pairs ``%(a)s[i]``, ``%(b)s[i]`` that reach a threshold, one row each.

    A statement of its own over the pairs (not joined to the candidates' query), so the planner,
    which cannot tell how few candidates there are, never reads the entities whole to join them."""
    vec = f"::vector({dim})"
    return f"""
        SELECT * FROM (
          SELECT a.key AS seed, a.id, a.key, a.type, a.name, b.id, b.key, b.type, b.name,
                 lower(a.name) = lower(b.name) AS name_equal,
                 (lower(b.name) = ANY(kb.entity_aliases(a.properties))
                  OR lower(a.name) = ANY(kb.entity_aliases(b.properties))) AS alias_equal,
                 similarity(a.name, b.name) AS trigram,
                 (SELECT 1 - (ea.embedding{vec} <=> eb.embedding{vec})
                    FROM kb.graph_object_embeddings ea JOIN kb.graph_object_embeddings eb
                      ON eb.object_id = b.id AND eb.model = %(model)s
                   WHERE ea.object_id = a.id AND ea.model = %(model)s) AS cosine,
                 (SELECT count(*) FROM (({_neighbours("a.id")}) INTERSECT ({_neighbours("b.id")})) x) AS shared,
                 {_degree("a.id")} AS degree_a, {_degree("b.id")} AS degree_b
          FROM unnest(%(a)s::uuid[], %(b)s::uuid[]) AS k(a, b)
          JOIN kb.graph_objects a ON a.id = k.a JOIN kb.graph_objects b ON b.id = k.b
          WHERE b.key > a.key) m
        WHERE name_equal OR alias_equal OR trigram >= %(trigram)s OR cosine >= %(cosine)s"""


def _entity(row: tuple[Any, ...], at: int, degree: int) -> dict[str, Any]:
    return {
        "id": str(row[at]),
        "key": row[at + 1],
        "type": row[at + 2],
        "name": row[at + 3],
        "relationships": int(degree),
        "relationshipsCapped": int(degree) >= DEGREE_MAX,
    }


def _pair(row: tuple[Any, ...]) -> dict[str, Any]:
    name_equal, alias_equal, trigram, cosine, shared, degree_a, degree_b = row[9:16]
    name_part = 1.0 if name_equal or alias_equal else float(trigram)
    score = 0.5 * name_part + 0.3 * float(cosine or 0.0) + 0.2 * min(1.0, shared / 3)
    a, b = _entity(row, 1, degree_a), _entity(row, 5, degree_b)
    # Keep the one more relationships point at: fewer to re-point.
    keep, merge = (b, a) if b["relationships"] > a["relationships"] else (a, b)
    return {
        "a": a,
        "b": b,
        "score": round(score, 4),
        "evidence": {
            "nameEqual": bool(name_equal),
            "aliasEqual": bool(alias_equal),
            "trigram": round(float(trigram), 4),
            "cosine": None if cosine is None else round(float(cosine), 4),
            "sharedNeighbours": int(shared),
            "sameType": a["type"] == b["type"],
        },
        "proposal": {
            "changes": [{"action": "merge_entities", "args": {"keep": keep["id"], "merge": merge["id"]}}]
        },
        # The change set in review that proposes this merge already (``duplicates_read``), if any.
        "pendingChangeSet": None,
    }


def duplicate_pairs(
    *, project_id: uuid.UUID, seeds: list[uuid.UUID], embedder: Embedder | None = None
) -> list[dict[str, Any]]:
    """The pairs of ``seeds`` (each with a later entity), by seed key, best first within a seed."""
    if not seeds:
        return []
    model = embedder or get_embedder()
    params: dict[str, Any] = {
        "p": project_id,
        "seeds": seeds,
        "model": model.name,
        "trigram": TRIGRAM_MIN,
        "cosine": COSINE_MIN,
    }
    with transaction.atomic(), connection.cursor() as cursor:
        vector_search_options_set(cursor, EF_SEARCH, trigram_threshold=TRIGRAM_MIN)
        cursor.execute(_candidates_sql(int(model.dimension)), params)
        found = cursor.fetchall()
        params["a"], params["b"] = [r[0] for r in found], [r[1] for r in found]
        cursor.execute(_measures_sql(int(model.dimension)), params)
        rows = cursor.fetchall()
    pairs = [(row[0], _pair(row)) for row in rows]
    pairs.sort(key=lambda sp: (sp[0], -sp[1]["score"], sp[1]["b"]["key"]))
    return [{**pair, "seed": seed} for seed, pair in pairs]


def duplicates_read(
    *, project_id: uuid.UUID, cursor: Cursor, limit: int, embedder: Embedder | None = None
) -> QueuePage:
    """A page of duplicate candidates from ``cursor`` on (see the module's docstring), each naming
    the change set in review that proposes its merge already (``pendingChangeSet``), or None."""
    page = _duplicates_walk(project_id=project_id, cursor=cursor, limit=limit, embedder=embedder)
    if page.items:
        pending = merges_pending(project_id=project_id)
        for pair in page.items:
            pair["pendingChangeSet"] = pending.get(frozenset((pair["a"]["id"], pair["b"]["id"])))
    return page


def _duplicates_walk(
    *, project_id: uuid.UUID, cursor: Cursor, limit: int, embedder: Embedder | None
) -> QueuePage:
    items: list[dict[str, Any]] = []
    after, inclusive, scanned = cursor.key, cursor.skip > 0, 0
    bounds = {"seedsMax": SEEDS_MAX, "perSeed": PER_SEED, "limitMax": LIMIT_MAX}
    # The first chunk is about as many seeds as half a page of pairs, then each twice the last (up
    # to ``SEEDS_CHUNK``): a graph dense in pairs fills a page from a few seeds.
    chunk = min(SEEDS_CHUNK, max(5, limit // 2))
    while scanned < SEEDS_MAX:
        wanted = min(chunk, SEEDS_MAX - scanned)
        chunk = min(SEEDS_CHUNK, chunk * 2)
        seeds = _seeds(project_id, after, inclusive, wanted)
        scanned += len(seeds)
        shown: dict[str, int] = {}
        for pair in duplicate_pairs(project_id=project_id, seeds=[s[0] for s in seeds], embedder=embedder):
            seed = pair.pop("seed")
            position = shown[seed] = shown.get(seed, 0) + 1
            if inclusive and seed == cursor.key and position <= cursor.skip:
                continue
            items.append(pair)
            if len(items) == limit:
                next_cursor = Cursor(key=seed, skip=position).encode("duplicates")
                return QueuePage("duplicates", items, next_cursor, bounds)
        if len(seeds) < wanted:
            return QueuePage("duplicates", items, None, bounds)
        after, inclusive = seeds[-1][1], False
    return QueuePage("duplicates", items, Cursor(key=after).encode("duplicates"), bounds)

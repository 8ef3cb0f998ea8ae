"""Search the graph in PostgreSQL: full text (tsvector), trigram names (pg_trgm) and vectors (pgvector).

Vectors live in ``kb.graph_object_embeddings`` (one row per entity and model). Vector queries
compare only vectors of the current embedder (``model = <name>``) and use the expression
``embedding::vector(<dim>)`` that the partial HNSW index is built on, so the planner can use it
(see ``embeddings.vector_index_ensure``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from apps.graph_tools.embeddings import Embedder, entity_text
from apps.graph_tools.names import ALIAS_MATCH, mention_candidates
from apps.graph_tools.text_search import tsvector_sql, websearch_tsquery_sql

# Reciprocal-rank fusion constant (Cormack et al. 2009).
RRF_K = 60
# How many candidates each ranker contributes to the fusion, at least.
FUSION_CANDIDATES = 50
# At most this many full-text matches are ranked in hybrid_search (those with all the query's
# words first). Each is a heap row read, often from outside shared buffers at 100k entities:
# 200 instead of 500 took p95 from 38-42 to 31-36 ms on the bench's queries.
FTS_RANKED = 200
# Names less similar than this to the query do not count in hybrid_search. The GIN index finds
# the names sharing at least this fraction of the query's trigrams, and each must then be read
# and compared: at pg_trgm's default of 0.3 a short query such as "Ana graph" (4 of its 10
# trigrams from "Ana") made every "Ana …" name a candidate, 5,000 reads at 100k entities for no
# match. 0.5 keeps typos and partial names ("Alise Smith", "Lisboa", "Carol" for "Carol White");
# a lone first name such as "Bob" (0.4 to "Bob Jones") is left to the full-text branch.
TRIGRAM_MIN_SIMILARITY = 0.5
# A word that more than this many entities of the table contain (planner statistics: the
# lexeme's frequency in ``pg_stats.most_common_elems`` of ``search_vector`` times the table's row
# estimate) is "common": hybrid_search's some-of-the-words and similar-name branches look for
# candidates through the query's other words only (it still ranks by every word, and the
# all-the-words branch still requires it). Reading a common word's GIN postings costs time in
# proportion to them (50,000 postings of a first name: ~80 ms at 1M entities) and yields thousands
# of entities a rank cannot tell apart. The postings are table-wide, so the table-wide frequency is
# the cost that matters. A graph of fewer entities than this never has a common word.
COMMON_WORD_ROWS = 5000
# When some query words were common, hybrid_search ranks at most this many names near the other
# words (a GIN bitmap cannot be read in similarity order).
TRIGRAM_CANDIDATES = 1000
# HNSW search breadth: higher is better recall, slower. 100 gave recall@10 0.998 at 100k entities
# but 0.860 at 1M (bench vectors); 200 gives 0.914 there, and 400 no more (the index's graph, built
# with pgvector's defaults m=16, ef_construction=64, is what limits it; docs/benchmarks.md).
HNSW_EF_SEARCH = 200
# hybrid_search looks for aliases among the word sequences of the query's first this many characters.
ALIAS_QUERY_CHARS = 300

ENTITY_COLUMNS = "o.id, o.key, o.type, o.name, o.description"


def entity_row(row: Sequence[Any]) -> dict[str, Any]:
    """Map ``ENTITY_COLUMNS`` to the result shape every tool uses."""
    return {"id": str(row[0]), "key": row[1], "type": row[2], "name": row[3], "description": row[4]}


def json_value(value: Any) -> Any:
    """A jsonb column read by a raw query: Django's psycopg setup hands it over as text."""
    return json.loads(value) if isinstance(value, str) else value


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"


def _fetch(sql: str, params: dict[str, Any] | list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def vector_search_options_set(cursor: Any, ef_search: int, *, trigram_threshold: float | None = None) -> None:
    # Local to the surrounding transaction, in one round trip. The iterative scan keeps
    # returning neighbours when the project/type filters reject some, instead of answering
    # fewer than ``limit``. ``%`` on names uses pg_trgm.similarity_threshold.
    settings = {"hnsw.ef_search": str(ef_search), "hnsw.iterative_scan": "relaxed_order"}
    if trigram_threshold is not None:
        settings["pg_trgm.similarity_threshold"] = str(trigram_threshold)
        settings["pg_trgm.word_similarity_threshold"] = str(trigram_threshold)
    cursor.execute(
        "SELECT " + ", ".join("set_config(%s, %s, true)" for _ in settings),
        [value for item in settings.items() for value in item],
    )


def _type_clause(types: Sequence[str] | None, params: dict[str, Any]) -> str:
    if not types:
        return ""
    params["types"] = list(types)
    return " AND o.type = ANY(%(types)s)"


def _vector_ranked(
    embedder: Embedder,
    vector: Sequence[float],
    params: dict[str, Any],
    types: Sequence[str] | None = None,
    exclude: bool = False,
) -> str:
    """A subquery of (id, distance) of the nearest vectors, ordered so the HNSW index serves it.

    The project filter is on the vector row itself; only a type filter visits the entity.
    """
    dim = int(embedder.dimension)
    params["vec"] = vector_literal(vector)
    params["model"] = embedder.name
    join = where = ""
    if types:
        params["types"] = list(types)
        join = "JOIN kb.graph_objects o ON o.id = e.object_id"
        where = " AND o.type = ANY(%(types)s)"
    if exclude:
        where += " AND e.object_id <> %(exclude)s"
    return f"""
        SELECT e.object_id AS id, e.embedding::vector({dim}) <=> %(vec)s::vector({dim}) AS distance
        FROM kb.graph_object_embeddings e {join}
        WHERE e.project_id = %(project)s AND e.model = %(model)s {where}
        ORDER BY e.embedding::vector({dim}) <=> %(vec)s::vector({dim})
        LIMIT %(candidates)s
    """


def vector_search(
    *,
    project_id: uuid.UUID,
    embedder: Embedder,
    vector: Sequence[float],
    types: Sequence[str] | None = None,
    exclude_id: uuid.UUID | None = None,
    limit: int = 10,
) -> list[dict[str, Any]]:
    """Nearest entities by cosine similarity; ``score`` is the cosine similarity (1 - distance)."""
    params: dict[str, Any] = {"project": project_id, "candidates": limit, "exclude": exclude_id}
    nearest = _vector_ranked(embedder, vector, params, types, exclude=exclude_id is not None)
    sql = f"""
        WITH nearest AS MATERIALIZED ({nearest})
        SELECT {ENTITY_COLUMNS}, 1 - n.distance AS score
        FROM nearest n JOIN kb.graph_objects o ON o.id = n.id
        ORDER BY n.distance, o.id
    """
    with transaction.atomic(), connection.cursor() as cursor:
        vector_search_options_set(cursor, max(HNSW_EF_SEARCH, limit))
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [{**entity_row(r), "score": round(float(r[5]), 6)} for r in rows]


def semantic_search(
    *, project_id: uuid.UUID, embedder: Embedder, query: str, type: str | None = None, limit: int = 10
) -> list[dict[str, Any]]:
    """Entities whose embedding is nearest to the query's (vector similarity only)."""
    vector = embedder.embed_query(query)
    return vector_search(
        project_id=project_id, embedder=embedder, vector=vector, types=[type] if type else None, limit=limit
    )


def find_similar(
    *, project_id: uuid.UUID, embedder: Embedder, entity: dict[str, Any], limit: int = 10
) -> list[dict[str, Any]]:
    """Entities nearest to ``entity`` (never the entity itself).

    Uses the stored vector when it is of the current model, else embeds the entity on the fly
    (without storing it: tools are read-only).
    """
    entity_id = uuid.UUID(entity["id"])
    rows = _fetch(
        "SELECT embedding::text FROM kb.graph_object_embeddings WHERE object_id = %s AND model = %s",
        [entity_id, embedder.name],
    )
    if rows:
        vector = [float(x) for x in rows[0][0].strip("[]").split(",")]
    else:
        text = entity_text(
            name=entity["name"], type=entity["type"], description=entity.get("description", "")
        )
        vector = embedder.embed_passages([text])[0]
    return vector_search(
        project_id=project_id, embedder=embedder, vector=vector, exclude_id=entity_id, limit=limit
    )


def text_search(
    *, project_id: uuid.UUID, query: str, type: str | None = None, limit: int = 20
) -> list[dict[str, Any]]:
    """Entities whose name or description match ``query``, or known by a name it holds.

    Full text (web-search syntax, English stemming, all words required) on name and description,
    the query as a substring of the name, or an alias (``names``) among the query's word sequences,
    as ``hybrid_search``'s alias branch finds it (through the aliases' partial GIN index). Exact
    matches of the name or of an alias first, then by text rank.
    """
    params: dict[str, Any] = {
        "project": project_id,
        "q": query,
        "like": "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",
        "alias_names": list(mention_candidates(query[:ALIAS_QUERY_CHARS])),
        "alias_whole": " ".join(query.split()).casefold(),
        "limit": limit,
    }
    where = _type_clause([type] if type else None, params)
    sql = f"""
        WITH q AS (SELECT {websearch_tsquery_sql("%(q)s")} AS tsq)
        SELECT {ENTITY_COLUMNS}
        FROM kb.graph_objects o, q
        WHERE o.project_id = %(project)s {where}
          AND (o.search_vector @@ q.tsq OR o.name ILIKE %(like)s
               OR {ALIAS_MATCH.format(names="%(alias_names)s")})
        ORDER BY (lower(o.name) = lower(%(q)s)
                  OR %(alias_whole)s = ANY(kb.entity_aliases(o.properties))) DESC,
                 ts_rank_cd(o.search_vector, q.tsq) DESC,
                 similarity(o.name, %(q)s) DESC,
                 o.name, o.key
        LIMIT %(limit)s
    """
    return [entity_row(r) for r in _fetch(sql, params)]


def _tsquery_lexeme(lexeme: str) -> str:
    """A lexeme as a quoted tsquery operand (quotes doubled, backslashes escaped)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _query_words(query: str) -> tuple[list[str], list[str], bool]:
    """The query's words and lexemes that are not common (``COMMON_WORD_ROWS``).

    Returns the lexemes of the words that are not common (for the some-of-the-words branch), the
    words themselves (for the similar-name branch) and whether any word was common. A word is
    common when all its lexemes are; a stop word (no lexeme) is never common.
    """
    rows = _fetch(
        f"""
        WITH common AS (
            SELECT array_agg(e.lexeme) AS lexemes
            FROM pg_stats s
            CROSS JOIN LATERAL unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs)
                AS e(lexeme, frequency)
            WHERE s.schemaname = 'kb' AND s.tablename = 'graph_objects' AND s.attname = 'search_vector'
              AND e.lexeme IS NOT NULL
              AND e.frequency * (SELECT c.reltuples FROM pg_class c
                                 WHERE c.oid = 'kb.graph_objects'::regclass) > %(rows)s
        )
        SELECT w.word, tsvector_to_array({tsvector_sql("w.word")}) AS lexemes,
               coalesce(tsvector_to_array({tsvector_sql("w.word")}) <@ c.lexemes, false)
        FROM regexp_split_to_table(%(q)s, '\\s+') WITH ORDINALITY AS w(word, n), common c
        WHERE w.word <> ''
        ORDER BY w.n
        """,
        {"q": query, "rows": COMMON_WORD_ROWS},
    )
    lexemes: list[str] = []
    words: list[str] = []
    dropped = False
    for word, word_lexemes, common in rows:
        if common and word_lexemes:
            dropped = True
            continue
        words.append(word)
        lexemes.extend(x for x in word_lexemes if x not in lexemes)
    return lexemes, words, dropped


def _text_branch(params: dict[str, Any], where: str, lexemes: list[str], dropped: bool) -> str:
    """The full-text ranking: the entities with all the words first, then those with some, at most
    FTS_RANKED in all; a GIN bitmap cannot be read in rank order, so ranking every match of a
    common word would dominate the latency (and such a word carries little signal)."""
    all_words = websearch_tsquery_sql("%(q)s")
    any_word = f"replace({all_words}::text, ' & ', ' | ')::tsquery"
    # Some of the words: only the words that are not common find candidates (all the words still
    # rank them), and none when every word is common.
    some_words = ""
    if not dropped:
        some_words = f"o.search_vector @@ {any_word}"
    elif lexemes:
        params["rare_q"] = " | ".join(_tsquery_lexeme(x) for x in lexemes)
        some_words = "o.search_vector @@ %(rare_q)s::tsquery"
    fts_parts = [
        f"""(SELECT o.id, o.search_vector, true AS all_words FROM kb.graph_objects o
             WHERE o.project_id = %(project)s AND o.search_vector @@ {all_words} {where})"""
    ]
    if some_words:
        fts_parts.append(
            f"""(SELECT o.id, o.search_vector, false FROM kb.graph_objects o
                 WHERE o.project_id = %(project)s AND {some_words}
                   AND NOT o.search_vector @@ {all_words} {where})"""
        )
    return f"""(SELECT m.id, row_number() OVER (
                    ORDER BY m.all_words DESC, ts_rank_cd(m.search_vector, {any_word}) DESC, m.id) AS rank
            FROM ({" UNION ALL ".join(fts_parts)} LIMIT %(fts_ranked)s) m
            ORDER BY rank LIMIT %(candidates)s)"""


def _name_branch(params: dict[str, Any], where: str, words: list[str], dropped: bool) -> str:
    """The name-trigram ranking ("" when every word of the query is common)."""
    if not dropped:
        # Names at least TRIGRAM_MIN_SIMILARITY similar (``%`` with pg_trgm.similarity_threshold,
        # through the GIN trigram index), the most similar first.
        return f"""(SELECT t.id, row_number() OVER (ORDER BY t.similarity DESC, t.id) AS rank
                FROM (SELECT o.id, similarity(o.name, %(trgm_q)s) AS similarity
                      FROM kb.graph_objects o
                      WHERE o.project_id = %(project)s AND o.name %% %(trgm_q)s {where}
                      ORDER BY 2 DESC, o.id
                      LIMIT %(candidates)s) t)"""
    if not words:
        return ""
    # The same, but the candidates are found through the words that are not common (names
    # holding a near match of them: ``<%`` with pg_trgm.word_similarity_threshold), at most
    # TRIGRAM_CANDIDATES, then compared with the whole query.
    params["trgm_rare"] = " ".join(words)[:200]
    return f"""(SELECT t.id, row_number() OVER (ORDER BY t.similarity DESC, t.id) AS rank
                FROM (SELECT c.id, similarity(c.name, %(trgm_q)s) AS similarity
                      FROM (SELECT o.id, o.name FROM kb.graph_objects o
                            WHERE o.project_id = %(project)s AND %(trgm_rare)s <%% o.name {where}
                            LIMIT %(trgm_candidates)s) c
                      WHERE similarity(c.name, %(trgm_q)s) >= {TRIGRAM_MIN_SIMILARITY}
                      ORDER BY 2 DESC, c.id
                      LIMIT %(candidates)s) t)"""


def _alias_branch(params: dict[str, Any], where: str, query: str) -> str:
    """The entities known by a name the query holds (an alias, ``names``), found through the
    aliases' partial GIN index: those whose alias is the whole query first."""
    candidates = mention_candidates(query[:ALIAS_QUERY_CHARS])
    params["alias_names"] = list(candidates)
    params["alias_whole"] = " ".join(query.split()).casefold()
    return f"""(SELECT a.id, row_number() OVER (ORDER BY a.whole DESC, a.id) AS rank
                FROM (SELECT o.id, %(alias_whole)s = ANY(kb.entity_aliases(o.properties)) AS whole
                      FROM kb.graph_objects o
                      WHERE o.project_id = %(project)s AND {ALIAS_MATCH.format(names="%(alias_names)s")} {where}
                      LIMIT %(candidates)s) a)"""


def hybrid_search(
    *,
    project_id: uuid.UUID,
    embedder: Embedder | None,
    query: str,
    types: Sequence[str] | None = None,
    limit: int = 10,
    query_vector: Sequence[float] | None = None,
) -> list[dict[str, Any]]:
    """Fuse three rankings with reciprocal-rank fusion (k=60): full text, name trigrams, vectors.

    Full text takes the entities with all the query's words, then those with some (a question
    rarely has all its words in one entity), ranked by cover density; trigrams rank names at
    least ``TRIGRAM_MIN_SIMILARITY`` similar to the query; vectors compare the query embedding
    with entity embeddings of the current model. ``score`` is the fused RRF score. An entity known
    by another name that the query holds (an alias, ``names``) counts as a name match would.

    In a large graph some query words are common (``COMMON_WORD_ROWS``): the some-of-the-words
    branch then looks only for the other words, and the name branch takes at most
    ``TRIGRAM_CANDIDATES`` names near the other words before comparing them with the whole query.
    In a graph of fewer than ``COMMON_WORD_ROWS`` entities nothing changes.
    """
    candidates = max(FUSION_CANDIDATES, limit * 2)
    trgm_q = query[:200]
    params: dict[str, Any] = {
        "project": project_id,
        "q": query,
        "trgm_q": trgm_q,
        "candidates": candidates,
        "fts_ranked": FTS_RANKED,
        "trgm_candidates": TRIGRAM_CANDIDATES,
        "limit": limit,
        "k": RRF_K,
    }
    where = _type_clause(types, params)
    lexemes, words, dropped = _query_words(query)
    branches = [_text_branch(params, where, lexemes, dropped)]
    name_branch = _name_branch(params, where, words, dropped)
    if name_branch:
        branches.append(name_branch)
    # An alias is a name that the full-text and trigram rankings do not read: its hits count in
    # the fusion as the two name rankings would count them.
    alias_branch = _alias_branch(params, where, query)
    branches += [alias_branch, alias_branch]
    if embedder is not None:
        vector = query_vector if query_vector is not None else embedder.embed_query(query)
        nearest = _vector_ranked(embedder, vector, params, types)
        branches.append(
            f"(SELECT v.id, row_number() OVER (ORDER BY v.distance, v.id) AS rank FROM ({nearest}) v)"
        )
    # Only the fused rows that can make the first ``limit`` (score at least the limit-th score,
    # ties included, as names break them) are joined back for their columns.
    sql = f"""
        WITH ranked AS ({" UNION ALL ".join(branches)}),
        fused AS MATERIALIZED (SELECT id, sum(1.0 / (%(k)s + rank)) AS score FROM ranked GROUP BY id)
        SELECT {ENTITY_COLUMNS}, f.score
        FROM fused f JOIN kb.graph_objects o ON o.id = f.id
        WHERE f.score >= coalesce(
            (SELECT score FROM fused ORDER BY score DESC OFFSET %(limit)s - 1 LIMIT 1), 0)
        ORDER BY f.score DESC, o.name, o.key
        LIMIT %(limit)s
    """
    with transaction.atomic(), connection.cursor() as cursor:
        vector_search_options_set(
            cursor,
            max(HNSW_EF_SEARCH, candidates),
            trigram_threshold=TRIGRAM_MIN_SIMILARITY,
        )
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [{**entity_row(r), "score": round(float(r[5]), 6)} for r in rows]

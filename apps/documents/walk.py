"""Rank passages by a walk over what they mention (issue #48): HippoRAG's idea on kgchat's index.

Passages and the names they mention (``kb.passage_mentions``, ``kb.mention_names``) form a graph:
a passage leads to each name it mentions, a name leads to each passage that mentions it and, far
more strongly (``TITLE_WEIGHT``), to the passages it is the title of (the passage about it, as a
link leads to its article), and two names lead to each other where the reviewed graph relates the
entities they name. A personalized PageRank (igraph's, the library HippoRAG 2 uses) restarts at
the question's own mentions, each weighted down by how many passages mention it, and, more
lightly, at the passages full text and vectors ranked first; where the walk ends ranks the
passages. A bridge passage (the director named in the film's passage, whose own passage the
question never names) is reached in two steps from the question's name, where neither ranking
finds it.

Bounded for large projects: only the seeds' neighbourhood is read (each name's first ``FANOUT``
passages, two hops from the seeds, the second hop at most ``SECOND_HOP`` mentions; the ranked
passages and the names they mention), never the whole index.

Weights measured on the docqa development sample (``make eval --set docqa``, issue #48), Recall@5
through ``search_passages``: full text and vectors fused 0.71 (2Wiki) / 0.68 (MuSiQue); the
undirected walk (a title edge 3 times a mention's, both ways) 0.93 / 0.75; the walk whose names
lead to their title passages 0.95 / 0.81. Source: Gutiérrez et al., "From RAG to Memory"
(HippoRAG 2), ICML 2025.
"""

from __future__ import annotations

import heapq
import math
import os
import re
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection, transaction

# igraph's PageRank (PRPACK) runs its loops on the OpenMP threads of the libgomp its wheel bundles,
# which spin while they wait: on 2 busy cores a 5,500-vertex walk took 98 ms, against 2.5 ms on one
# thread. A walk is one request's small job, so one thread, set before igraph loads its libgomp
# (an operator's own OMP_NUM_THREADS is kept; no other library of this process uses OpenMP).
os.environ.setdefault("OMP_NUM_THREADS", "1")
import igraph

from apps.graph_tools.recognizer import FUNCTION_WORDS, Mention, mentions_find, normalise

# The walk goes on with this probability at each step (igraph's ``damping``), else restarts.
DAMPING = 0.85
# A name leads to a passage it is the title of with this many times the weight it leads to a
# passage that only mentions it: the walk from a name goes on almost only to the passage about it
# (docqa dev, Recall@5 2Wiki / MuSiQue: 10 → 0.95 / 0.80, 30 → 0.95 / 0.81, 100 → 0.95 / 0.80), where
# a hub name's many mentions would otherwise take most of it. A passage leads to each of its names,
# its title included, alike.
TITLE_WEIGHT = 30.0
# A ranked passage restarts the walk with this weight over its rank (1-based); a seed name with 1.
RANKED_WEIGHT = 0.05
# A question's name that no passage mentions as such is matched to names this similar (pg_trgm),
# at most FUZZY_MATCHES of them, each seeding with FUZZY_WEIGHT.
FUZZY_SIMILARITY = 0.5
FUZZY_MATCHES = 2
FUZZY_WEIGHT = 0.7
# Passages of the walk returned, best first (the search then takes its ``limit``).
KEEP = 50
# Passages read per name: a name mentioned more often is a hub that would spread the walk thin.
FANOUT = 50
# Mentions the second hop reads at most (the passages of the names the seeds' passages mention),
# taken from the names fewest passages mention first: the walk gives each of a name's passages a
# share of what reaches the name, so the most mentioned names' passages are the least likely to
# rank. A project of a few thousand passages never reaches it; at 100k passages it keeps the walk's
# graph to a few thousand vertices (igraph's PageRank and building the graph grow with it).
SECOND_HOP = 2000
# A run of the question's words written in lower case that is an indexed name as it stands ("during
# the reign of terror", "where monster trucks is set") seeds the walk too, with this weight (as a
# name found only by similarity): runs of 2 to PHRASE_WORDS words outside the question's mentions.
# Not single words: a lower-case word is a common noun more often than a name ("film", "state";
# with them docqa dev R@5 fell from 0.95 / 0.81 to 0.81 / 0.70). Docqa dev, R@2 / R@5 / all@5, MuSiQue:
# 0.63 / 0.81 / 0.60 → 0.65 / 0.81 / 0.62, 2Wiki unchanged.
PHRASE_WEIGHT = 0.7
PHRASE_WORDS = 6
# A name of the question read on with up to EXTEND_WORDS of the words written around it is an
# indexed name as it stands ("the range that Norris mountain is part of": "Norris Mountain"): it
# seeds the walk in place of the name alone, as the name would (weight 1): "Norris" alone matched
# "Rufus Norris" by similarity. Docqa dev, MuSiQue R@2 / R@5 / all@5: 0.65 / 0.81 / 0.62 →
# 0.66 / 0.82 / 0.64, 2Wiki unchanged; 1 word or 2 alike.
EXTEND_WORDS = 2
# A parenthesised qualifier of the question ("Palo Alto (2013 Film)"), and a word of it.
_QUALIFIER = re.compile(r"\([^()]*\)")
_WORD = re.compile(r"[^\W_]+(?:['’.\-][^\W_]+)*")


@dataclass(frozen=True)
class Walked:
    """A passage the walk reached: its score (the walk's probability of ending there) and the
    question's mentions it mentions too."""

    passage_id: uuid.UUID
    score: float
    mentions: tuple[str, ...]


def _seeds(project_id: uuid.UUID, keys: dict[str, str]) -> dict[uuid.UUID, tuple[str, float]]:
    """The names the question mentions: by key, else the most similar names (``FUZZY_*``)."""
    with transaction.atomic(), connection.cursor() as cursor:
        # ``%`` at FUZZY_SIMILARITY, not pg_trgm's default 0.3: the trigram index then hands over
        # only the names that may be that similar (at 100k passages, 70 for a name, not 3,000).
        cursor.execute("SELECT set_config('pg_trgm.similarity_threshold', %s, true)", [str(FUZZY_SIMILARITY)])
        cursor.execute(
            """SELECT k, n.id, 1.0 FROM unnest(%(keys)s::text[]) k
               JOIN kb.mention_names n ON n.project_id = %(project)s AND n.normalised = k
               UNION ALL
               SELECT k, f.id, %(fuzzy_weight)s FROM unnest(%(keys)s::text[]) k
               CROSS JOIN LATERAL (
                   SELECT n.id FROM kb.mention_names n
                   WHERE n.project_id = %(project)s AND n.normalised %% k AND n.normalised <> k
                     AND similarity(n.normalised, k) >= %(similarity)s
                     AND NOT EXISTS (SELECT 1 FROM kb.mention_names e
                                     WHERE e.project_id = %(project)s AND e.normalised = k)
                   ORDER BY similarity(n.normalised, k) DESC, n.id LIMIT %(fuzzy)s
               ) f""",
            {
                "project": project_id,
                "keys": list(keys),
                "similarity": FUZZY_SIMILARITY,
                "fuzzy": FUZZY_MATCHES,
                "fuzzy_weight": FUZZY_WEIGHT,
            },
        )
        rows = cursor.fetchall()
    return {name_id: (keys[key], float(weight)) for key, name_id, weight in rows}


_NEIGHBOURHOOD_SQL = """
WITH seeds AS (SELECT unnest(%(seeds)s::uuid[]) AS id),
hop AS (
    SELECT DISTINCT m.passage_id FROM seeds
    CROSS JOIN LATERAL (SELECT passage_id FROM kb.passage_mentions
                        WHERE mention_name_id = seeds.id LIMIT %(fanout)s) m
),
near AS (
    SELECT m.passage_id, m.mention_name_id, m.kind, m.passage_id IN (SELECT passage_id FROM hop) AS hop
    FROM kb.passage_mentions m
    WHERE m.passage_id = ANY(ARRAY(SELECT passage_id FROM hop) || %(ranked)s::uuid[])
),
names AS MATERIALIZED (
    SELECT hop_names.id, (SELECT count(*) FROM (SELECT 1 FROM kb.passage_mentions
                                                WHERE mention_name_id = hop_names.id
                                                LIMIT %(fanout)s) m) AS passages
    FROM (SELECT DISTINCT mention_name_id AS id FROM near WHERE hop) hop_names
),
kept AS (
    SELECT id FROM (SELECT id, sum(passages) OVER (ORDER BY passages, id) AS upto FROM names) n
    WHERE upto <= %(second_hop)s
)
SELECT passage_id::text, mention_name_id::text, kind FROM near
UNION
SELECT m.passage_id::text, kept.id::text, m.kind FROM kept
CROSS JOIN LATERAL (SELECT passage_id, kind FROM kb.passage_mentions
                    WHERE mention_name_id = kept.id LIMIT %(fanout)s) m
"""

_RELATED_SQL = """
SELECT a.id, b.id FROM kb.mention_names a
JOIN kb.graph_relationships r ON r.src_id = a.entity_id
JOIN kb.mention_names b ON b.entity_id = r.dst_id AND b.project_id = a.project_id
WHERE a.project_id = %(project)s AND a.id = ANY(%(names)s::uuid[]) AND b.id = ANY(%(names)s::uuid[])
"""


def _question_keys(query: str, mentions: Sequence[Mention]) -> tuple[dict[str, str], list[tuple[int, int]]]:
    """The question's mentions (key → as written), but for those inside a parenthesised qualifier:
    in "the director of film Atomised (Film)" the qualifier says which Atomised is meant, and "Film"
    as a seed would send the walk to every passage that starts a sentence with it (docqa dev, 2Wiki
    R@5 / all@5: 0.95 / 0.88 → 0.97 / 0.94). Also the spans of all its mentions and qualifiers."""
    qualifiers = [match.span() for match in _QUALIFIER.finditer(query)]
    keys: dict[str, str] = {}
    spans = list(qualifiers)
    for mention in mentions:
        spans.append((mention.start, mention.end))
        if not any(start < mention.start and mention.end < end for start, end in qualifiers):
            keys.setdefault(mention.normalised, mention.surface)
    return keys, spans


def _question_phrases(query: str, taken: Sequence[tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """The question's runs of 2 to ``PHRASE_WORDS`` words outside ``taken`` (its mentions and
    qualifiers) that neither start nor end with a function word, by key (each key's first span)."""
    words = [match.span() for match in _WORD.finditer(query)]
    phrases: dict[str, tuple[int, int]] = {}
    for length in range(PHRASE_WORDS, 1, -1):
        for first in range(len(words) - length + 1):
            start, end = words[first][0], words[first + length - 1][1]
            ends = (query[slice(*words[first])], query[slice(*words[first + length - 1])])
            if any(word.casefold() in FUNCTION_WORDS for word in ends):
                continue
            if any(a < end and start < b for a, b in taken):
                continue
            if key := normalise(query[start:end]):
                phrases.setdefault(key, (start, end))
    return phrases


def _extended_names(
    query: str, keys: dict[str, str], mentions: Sequence[Mention]
) -> dict[str, tuple[int, int]]:
    """Each of the question's mentions (``keys``) read on with 1 to ``EXTEND_WORDS`` of the words
    after or before it, none a function word at the far end, by key (each key's first span)."""
    words = [match.span() for match in _WORD.finditer(query)]
    extended: dict[str, tuple[int, int]] = {}
    for mention in mentions:
        if mention.normalised not in keys:
            continue
        inside = [i for i, (a, b) in enumerate(words) if mention.start <= a and b <= mention.end]
        if not inside:
            continue
        for before in range(EXTEND_WORDS + 1):
            for after in range(EXTEND_WORDS + 1 - before):
                first, last = inside[0] - before, inside[-1] + after
                if (before or after) and 0 <= first and last < len(words):
                    ends = (query[slice(*words[first])], query[slice(*words[last])])
                    if not any(word.casefold() in FUNCTION_WORDS for word in ends):
                        start, end = words[first][0], words[last][1]
                        if key := normalise(query[start:end]):
                            extended.setdefault(key, (start, end))
    return extended


def _names_found(project_id: uuid.UUID, keys: Sequence[str]) -> dict[str, uuid.UUID]:
    """The indexed names among ``keys`` (exactly), by key: one query for the phrases and the names
    read on."""
    if not keys:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT normalised, id FROM kb.mention_names WHERE project_id = %s AND normalised = ANY(%s)",
            [project_id, list(keys)],
        )
        return dict(cursor.fetchall())


def _phrase_seeds(
    query: str,
    phrases: dict[str, tuple[int, int]],
    found: dict[str, uuid.UUID],
    weight: float = PHRASE_WEIGHT,
) -> dict[uuid.UUID, tuple[str, float]]:
    """The names among ``phrases`` that are ``found``, the longest first, none overlapping another."""
    named = [key for key in phrases if key in found]
    taken: list[tuple[int, int]] = []
    seeds: dict[uuid.UUID, tuple[str, float]] = {}
    for key in sorted(named, key=lambda k: (phrases[k][0] - phrases[k][1], phrases[k][0])):
        start, end = phrases[key]
        if not any(a < end and start < b for a, b in taken):
            taken.append((start, end))
            seeds[found[key]] = (query[start:end], weight)
    return seeds


def passages_walk(
    *, project_id: uuid.UUID, query: str, ranked: Sequence[uuid.UUID] = ()
) -> list[Walked] | None:
    """The passages a personalized PageRank from ``query``'s mentions (and, lightly, from
    ``ranked``, full text and vectors' fused ranking, best first) reaches, best first.

    None when the query mentions no name a passage of the project mentions: the walk has nowhere
    to start, and the caller keeps its own ranking."""
    mentions = mentions_find(query)
    keys, spans = _question_keys(query, mentions)
    phrases = _question_phrases(query, spans)
    extended = _extended_names(query, keys, mentions)
    found = _names_found(project_id, [*phrases, *extended])
    seeds = _phrase_seeds(query, phrases, found)
    longer = _phrase_seeds(query, extended, found, weight=1.0)
    if longer:
        # A name read on no longer seeds alone: what it names is the longer name.
        read = [extended[normalise(surface)] for surface, _ in longer.values()]
        inside = {m.normalised for m in mentions if any(a <= m.start and m.end <= b for a, b in read)}
        keys = {key: surface for key, surface in keys.items() if key not in inside}
        seeds.update(longer)
    if keys:
        seeds.update(_seeds(project_id, keys))
    if not seeds:
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            _NEIGHBOURHOOD_SQL,
            {
                "seeds": list(seeds),
                "ranked": list(ranked),
                "fanout": FANOUT,
                "second_hop": SECOND_HOP,
            },
        )
        edges = cursor.fetchall()
        names = sorted({name for _, name, _ in edges})
        cursor.execute(_RELATED_SQL, {"project": project_id, "names": names})
        related = [(str(a), str(b)) for a, b in cursor.fetchall()]
    # Ids as text from here on: hashing a uuid.UUID (a Python __hash__) was a third of the walk's time.
    return _ranked_by_walk(
        edges, related, {str(name): seed for name, seed in seeds.items()}, [str(p) for p in ranked]
    )


def _ranked_by_walk(
    edges: Sequence[tuple[str, str, str]],
    related: Sequence[tuple[str, str]],
    seeds: dict[str, tuple[str, float]],
    ranked: Sequence[str],
) -> list[Walked]:
    """Ids are uuids' text (lower-case, so ordered as the uuids are)."""
    vertex: dict[str, int] = {}

    def at(node: str) -> int:
        return vertex.setdefault(node, len(vertex))

    # The walk's arcs (from, to): a passage to its names, a name back to its passages (to the
    # passage it is the title of with TITLE_WEIGHT), related names both ways.
    weight: dict[tuple[int, int], float] = {}
    passages: set[str] = set(ranked)
    mentioned: dict[str, set[str]] = defaultdict(set)
    for passage, name, kind in edges:
        p, n = at(passage), at(name)
        weight[(p, n)] = 1.0
        weight[(n, p)] = max(weight.get((n, p), 0.0), TITLE_WEIGHT if kind == "title" else 1.0)
        passages.add(passage)
        mentioned[name].add(passage)
    for a, b in related:
        weight[(at(a), at(b))] = weight[(at(b), at(a))] = 1.0
    for passage in ranked:
        at(passage)
    reset = [0.0] * len(vertex)
    for name, (_, strength) in seeds.items():
        if name in vertex:
            reset[vertex[name]] += strength / math.log(len(mentioned[name]) + 2)
    for rank, passage in enumerate(ranked, start=1):
        reset[vertex[passage]] += RANKED_WEIGHT / rank
    if not any(reset):
        return []
    graph = igraph.Graph(n=len(vertex), edges=list(weight), directed=True)
    scores = graph.personalized_pagerank(
        damping=DAMPING, reset=reset, weights=list(weight.values()), directed=True
    )
    best = heapq.nlargest(KEEP, passages, key=lambda p: (scores[vertex[p]], p))
    return [
        Walked(
            passage_id=uuid.UUID(passage),
            score=float(scores[vertex[passage]]),
            mentions=tuple(sorted(seeds[n][0] for n in seeds if passage in mentioned[n])),
        )
        for passage in best
    ]

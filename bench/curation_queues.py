"""The curation queues and the graph pages' reads at scale (#51), timed on ``bench.graph_tools``'
synthetic graph (``make bench-scale``: 1M entities, 5M relationships), which calls ``queues_timed``.

Each queue's page (limit 25) is read from ``REPEAT`` cursors drawn across the graph (a member
paging from anywhere), and so are the entity page's reads and the drawing's neighbourhood. The
synthetic graph has no mentions, imports or change rows, so ``unsupported`` finds an item at
every entity; every entity is a relationship's source, so ``orphans`` finds none and each page
walks its whole bound (``SCAN_MAX``), the worst case; its names ("Ana Silva 123") are near one
another, so ``duplicates`` finds a trigram and a vector candidate at nearly every seed. An
ontology restricting ``WORKS_AT`` to Person → Company makes five of six of them break it, so
``ontology-violations`` fills its pages from the relationships' index (cursors: a WORKS_AT id).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from apps.curation import duplicates, graph_selectors, neighbourhood, queues
from apps.curation.queues import Cursor
from apps.graph_tools.embedders import Embedder
from apps.graph_tools.ontology import queue
from apps.graph_tools.ontology.document import ontology_parse
from apps.graph_tools.ontology.services import ontology_store

PAGE = 25


def queues_timed(
    pid: uuid.UUID,
    embedder: Embedder,
    keys: list[str],
    add: Callable[..., None],
) -> None:
    """Time the queues and the pages' reads with ``add(name, func, target)`` (``func(i)`` reads the
    ``i``-th drawn key's page)."""
    cursors = [Cursor(key=k) for k in keys]
    add(
        "queue orphans (page of 25)",
        lambda i: queues.orphans_read(project_id=pid, cursor=cursors[i], limit=PAGE),
        "p95 < 100 ms",
    )
    add(
        "queue unsupported (page of 25)",
        lambda i: queues.unsupported_read(project_id=pid, cursor=cursors[i], limit=PAGE),
        "p95 < 100 ms",
    )
    add(
        "queue duplicates (page of 25)",
        lambda i: duplicates.duplicates_read(
            project_id=pid, cursor=cursors[i], limit=PAGE, embedder=embedder
        ),
        "p95 < 500 ms",
    )
    _ontology_put(pid)
    violations = [None, *(queue.cursor_encode("WORKS_AT", str(_entity_id(pid, k))) for k in keys[1:])]
    add(
        "queue ontology-violations (page of 25)",
        lambda i: queue.violations_page(project_id=pid, cursor=violations[i], limit=PAGE),
        "p95 < 100 ms",
    )
    add(
        "graph page: entities of a type by name",
        lambda i: graph_selectors.entity_list_page(project_id=pid, type="Person", after=_after(keys[i])),
    )
    add("entity page: relationships by type", lambda i: _groups(pid, keys[i]))
    add("drawing: neighbourhood (40 of 2000)", lambda i: _star(pid, keys[i]))


def _ontology_put(pid: uuid.UUID) -> None:
    """An ontology that five of six WORKS_AT relationships of the synthetic graph break (its ends'
    types are drawn at random): the queue's worst case, a full page at every scan."""
    from bench.graph_tools import ENTITY_TYPES, REL_TYPES

    document = {
        "entity_types": {t: {} for t in ENTITY_TYPES},
        "relationship_types": {
            r: ({"domain": ["Person"], "range": ["Company"]} if r == "WORKS_AT" else {}) for r in REL_TYPES
        },
    }
    ontology_store(project_id=pid, ontology=ontology_parse(document), user_id=None)


def _after(key: str) -> Any:
    """A list cursor at the name of the entity ``key`` (as ``bench.graph_tools.build`` names it)."""
    from bench.graph_tools import FIRST, LAST

    n = int(key[1:])
    name = f"{FIRST[(n * 7) % len(FIRST)]} {LAST[(n // len(FIRST)) % len(LAST)]} {n}".lower()
    return graph_selectors._list_cursor(name, str(uuid.UUID(int=0)))


def _entity_id(pid: uuid.UUID, key: str) -> uuid.UUID:
    from bench.graph_tools import _entity_id as derived

    return derived(pid, int(key[1:]))


def _groups(pid: uuid.UUID, key: str) -> Any:
    return graph_selectors.relationship_groups(entity_id=_entity_id(pid, key))


def _star(pid: uuid.UUID, key: str) -> Any:
    star = neighbourhood._star(_entity_id(pid, key))
    return star[: neighbourhood.LIMIT_DEFAULT]

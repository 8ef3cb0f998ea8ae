"""hybrid_search when some query words are common in the graph (issue #16 item 2).

A word that many entities contain (``search.COMMON_WORD_ROWS``, from the planner's statistics of
``search_vector``) no longer finds candidates in the some-of-the-words and similar-name branches.
The threshold is lowered here so that a graph of a few dozen entities has a common word; ANALYZE
writes the statistics the search reads.
"""

from __future__ import annotations

import pytest
from django.db import connection

from apps.graph_tools import search
from apps.projects.models import Project
from tests.factories import make_entity, make_project

pytestmark = pytest.mark.django_db

LUIS_COUNT = 60


@pytest.fixture
def crowded(monkeypatch: pytest.MonkeyPatch) -> Project:
    """60 people called Luis, one harbour master called Marta Quintela, one Luis Lojivo."""
    monkeypatch.setattr(search, "COMMON_WORD_ROWS", LUIS_COUNT // 2)
    project = make_project(name="Crowded")
    surnames = ["Silva", "Santos", "Costa", "Pereira", "Almeida", "Rocha"]
    for i in range(LUIS_COUNT):
        make_entity(
            project,
            f"luis{i}",
            type="Person",
            name=f"Luis {surnames[i % len(surnames)]} {i}",
            description="Works at the bakery.",
        )
    make_entity(
        project, "marta", type="Person", name="Marta Quintela", description="Harbour master in Porto."
    )
    make_entity(project, "lojivo", type="Person", name="Luis Lojivo", description="Works at the bakery.")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE kb.graph_objects")
    return project


def hybrid_keys(project: Project, query: str, limit: int = 5) -> list[str]:
    results = search.hybrid_search(project_id=project.id, embedder=None, query=query, limit=limit)
    return [r["key"] for r in results]


def test_the_planner_statistics_mark_the_crowded_first_name_as_common(crowded: Project):
    lexemes, words, dropped = search._query_words("Luis harbour")

    assert dropped
    assert words == ["harbour"]
    assert lexemes == ["harbour"]


def test_a_query_mixing_a_common_and_a_rare_word_finds_the_rare_words_entity_first(crowded: Project):
    # No entity has both words. Before, the some-of-the-words branch ranked the 60 entities
    # named Luis (a name match weighs more than a description match) above Marta.
    keys = hybrid_keys(crowded, "Luis harbour")

    assert keys[0] == "marta"


def test_a_misspelt_rare_word_beside_a_common_one_still_finds_the_name(crowded: Project):
    keys = hybrid_keys(crowded, "Luis Lojivi")

    assert keys[0] == "lojivo"


def test_a_query_of_common_words_only_still_finds_the_entities_with_all_of_them(crowded: Project):
    keys = hybrid_keys(crowded, "Luis bakery", limit=10)

    assert len(keys) == 10
    assert all(k.startswith("luis") or k == "lojivo" for k in keys)


def test_below_the_threshold_no_word_is_common_and_the_ranking_is_unchanged(
    crowded: Project, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(search, "COMMON_WORD_ROWS", 5000)

    lexemes, words, dropped = search._query_words("Luis harbour")

    assert not dropped
    assert words == ["Luis", "harbour"]
    assert lexemes == ["lui", "harbour"]

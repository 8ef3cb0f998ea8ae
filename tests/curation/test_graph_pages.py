"""The graph pages (#51): the graph (types with counts, search, the entity list a page at a time),
an entity's page (properties, aliases, relationships by type and direction, the passages that
mention it, my answers that cited it, its history) and the queues page; members only."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from apps.chat.models import Message
from apps.curation import graph_selectors as selectors
from apps.documents.services import document_upload
from apps.graph_tools.importer import graph_import
from apps.graph_tools.models import GraphObject
from tests.factories import (
    add_member,
    make_conversation,
    make_entity,
    make_project,
    make_relationship,
    make_user,
)
from tests.graph_tools.records import jsonl

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _names(html: str) -> list[str]:
    return re.findall(r'<a class="entity-link" href="[^"]+">([^<]*)</a>', html)


def test_the_graph_page_shows_each_type_with_its_count_and_its_entities_by_name():
    owner, viewer = make_user(), make_user()
    project = make_project(owner)
    add_member(project, viewer, "viewer")
    for key, type_, name in (("b", "City", "berlin"), ("a", "City", "Amsterdam"), ("p", "Person", "Ada")):
        make_entity(project, key, type_, name)

    page = _client(viewer).get(f"/projects/{project.id}/graph")
    cities = _client(viewer).get(f"/projects/{project.id}/graph", {"type": "City"})

    html = page.content.decode()
    assert page.status_code == 200
    assert re.search(r'data-type="City"><a [^>]+>City</a><span class="count">2</span>', html)
    assert re.search(r'data-type="Person"><a [^>]+>Person</a><span class="count">1</span>', html)
    assert _names(html) == ["Ada", "Amsterdam", "berlin"]
    assert _names(cities.content.decode()) == ["Amsterdam", "berlin"]


def test_the_entity_list_goes_on_page_after_page_by_name(monkeypatch):
    monkeypatch.setattr(selectors, "LIST_PAGE", 2)
    monkeypatch.setattr(
        selectors.entity_list_page, "__kwdefaults__", {"type": None, "after": None, "limit": 2}
    )
    owner = make_user()
    project = make_project(owner)
    for n in range(5):
        make_entity(project, f"k{n}", "Thing", f"Thing {n}")
    client = _client(owner)

    seen, url, pages = [], f"/projects/{project.id}/graph", 0
    params: dict[str, str] = {}
    while True:
        html = client.get(url, params).content.decode()
        seen += _names(html)
        pages += 1
        found = re.search(r'after=([A-Za-z0-9_-]+)" rel="next"', html)
        if not found:
            break
        params = {"after": found.group(1)}
    bad = client.get(url, {"after": "%%%"})

    assert seen == [f"Thing {n}" for n in range(5)] and pages == 3
    assert bad.status_code == 400


def test_the_graph_page_searches_by_name_and_alias():
    owner = make_user()
    project = make_project(owner)
    make_entity(project, "lisbon", "City", "Lisbon", properties={"aliases": ["Lisboa"]})
    make_entity(project, "porto", "City", "Porto")

    html = _client(owner).get(f"/projects/{project.id}/graph", {"q": "Lisboa"}).content.decode()

    assert _names(html) == ["Lisbon"]
    assert "Best 50 matches for “Lisboa”" in html


def test_the_entity_page_shows_properties_aliases_relationships_passages_answers_and_history():
    owner, viewer = make_user("curator"), make_user()
    project = make_project(owner)
    add_member(project, viewer, "viewer")
    graph_import(
        project=project,
        lines=jsonl(
            {
                "kind": "entity",
                "key": "lisbon",
                "type": "City",
                "name": "Lisbon",
                "properties": {"aliases": ["Lisboa"], "population": 545000},
            },
            {"kind": "entity", "key": "pt", "type": "Country", "name": "Portugal"},
            {"kind": "entity", "key": "ana", "type": "Person", "name": "Ana"},
            {"kind": "relationship", "type": "CAPITAL_OF", "src": "lisbon", "dst": "pt"},
            {"kind": "relationship", "type": "LIVES_IN", "src": "ana", "dst": "lisbon"},
        ).splitlines(),
        user_id=owner.pk,
    )
    lisbon = GraphObject.objects.get(project=project, key="lisbon")
    document_upload(project=project, name="trip.txt", data=b"We flew to Lisboa and walked all day.")
    citation = [{"id": str(lisbon.id), "key": "lisbon", "type": "City", "name": "Lisbon"}]
    mine = make_conversation(viewer, project, title="Capitals", messages=[("user", "Capital of Portugal?")])
    answer = f"It is [Lisbon](entity:{lisbon.id})."
    Message.objects.create(conversation=mine, role="assistant", content=answer, citations=citation)
    theirs = make_conversation(owner, project, title="Owner's private chat")
    Message.objects.create(conversation=theirs, role="assistant", content="Lisbon.", citations=citation)

    page = _client(viewer).get(f"/projects/{project.id}/graph/entities/{lisbon.id}")

    html = page.content.decode()
    assert page.status_code == 200
    assert '<ul id="entity-aliases"><li>Lisboa</li></ul>' in html
    assert "<td>population</td><td>545000</td>" in html
    assert re.search(r'data-type="CAPITAL_OF" data-direction="out">.*?Portugal', html, re.S)
    assert re.search(r'data-type="LIVES_IN" data-direction="in">.*?Ana', html, re.S)
    assert "We flew to <mark>Lisboa</mark> and walked" in html
    assert f'href="/chat/{mine.id}/">Capitals</a>' in html and "Owner&#x27;s private chat" not in html
    assert (
        "It is Lisbon." in html
        and "entity:" not in html.split('id="answers-heading"')[-1].split("</section>")[0]
    )
    history = re.findall(r'<tr class="history-row" data-action="([a-z_]+)">(.*?)</tr>', html, re.S)
    assert [action for action, _ in history] == [
        "import_relationship",
        "import_relationship",
        "import_entity",
    ]
    assert "curator" in history[-1][1] and "Graph import" in history[-1][1] and "v1" in history[-1][1]


def test_an_entity_page_of_another_project_or_for_a_stranger_is_404_and_logged_out_goes_to_log_in():
    owner, stranger = make_user(), make_user()
    project, other = make_project(owner), make_project(owner)
    entity = make_entity(project, "x")
    elsewhere = make_entity(other, "y")

    answers = [
        _client(stranger).get(f"/projects/{project.id}/graph/entities/{entity.id}").status_code,
        _client(stranger).get(f"/projects/{project.id}/graph").status_code,
        _client(stranger).get(f"/projects/{project.id}/graph/queues").status_code,
        _client(owner).get(f"/projects/{project.id}/graph/entities/{elsewhere.id}").status_code,
    ]
    logged_out = Client().get(f"/projects/{project.id}/graph")

    assert answers == [404, 404, 404, 404]
    assert logged_out.status_code == 302 and "/accounts/login/" in logged_out["location"]


def test_the_entity_page_escapes_what_the_graph_holds():
    owner = make_user()
    project = make_project(owner)
    evil = make_entity(
        project, "evil", "<b>Type</b>", "<script>alert(1)</script>", properties={"x": "<img src=x>"}
    )

    html = _client(owner).get(f"/projects/{project.id}/graph/entities/{evil.id}").content.decode()

    assert "<script>alert(1)" not in html and "<img src=x>" not in html and "<b>Type</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_queues_page_has_a_tab_per_queue_and_a_merge_button_per_duplicate_pair():
    owner = make_user()
    project = make_project(owner)
    a = make_entity(project, "a", "Person", "Jane Doe")
    b = make_entity(project, "b", "Person", "jane doe")
    make_relationship(project, a, "KNOWS", b)
    make_entity(project, "c", "Thing", "All Alone")
    client = _client(owner)

    orphans = client.get(f"/projects/{project.id}/graph/queues").content.decode()
    pairs = client.get(f"/projects/{project.id}/graph/queues", {"kind": "duplicates"}).content.decode()
    unknown = client.get(f"/projects/{project.id}/graph/queues", {"kind": "everything"})

    assert re.findall(r'role="tab" href="\?kind=(\w+)"', orphans) == ["orphans", "duplicates", "unsupported"]
    assert (
        f'href="/projects/{project.id}/ontology#ontology-violations" id="tab-ontology-violations"' in orphans
    )
    assert "All Alone" in orphans and "Jane Doe" not in orphans
    assert pairs.count('class="queue-item duplicate-pair"') == 1
    assert f'"keep": "{a.id}", "merge": "{b.id}"' in pairs and "Propose merge" in pairs
    assert unknown.status_code == 404


def test_a_merged_entitys_page_leads_to_the_one_it_went_into_which_lists_the_answers_that_cited_it():
    from asgiref.sync import async_to_sync

    from apps.graph_tools.registry import WriteAuthorization, tool_call

    owner = make_user()
    project = make_project(owner)
    keep = make_entity(project, "ada", "Person", "Ada Lovelace")
    gone = make_entity(project, "ada2", "Person", "A. Lovelace")
    chat = make_conversation(owner, project, title="Who wrote it")
    cited = [{"id": str(gone.id), "key": "ada2", "type": "Person", "name": "A. Lovelace"}]
    Message.objects.create(conversation=chat, role="assistant", content="A. Lovelace did.", citations=cited)
    async_to_sync(tool_call)(
        project_id=project.id,
        name="merge_entities",
        arguments={"keep": str(keep.id), "merge": str(gone.id)},
        authorization=WriteAuthorization(via="direct", user_id=owner.pk),
    )
    client = _client(owner)

    old = client.get(f"/projects/{project.id}/graph/entities/{gone.id}")
    page = client.get(f"/projects/{project.id}/graph/entities/{keep.id}").content.decode()

    assert old.status_code == 302 and old["location"] == f"/projects/{project.id}/graph/entities/{keep.id}"
    assert f'href="/chat/{chat.id}/">Who wrote it</a>' in page
    assert '<tr class="history-row" data-action="merge_entities">' in page


def test_the_change_sets_tab_lists_curation_change_sets_with_approve_in_review_and_undo_once_applied():
    from apps.curation.proposals import curation_propose
    from apps.documents.review import change_set_decide
    from apps.projects.selectors import Principal

    owner, editor, stranger = make_user(), make_user(), make_user()
    project = make_project(owner)
    add_member(project, editor, "editor")
    a, b = make_entity(project, "a", "Person", "Jane Doe"), make_entity(project, "b", "Person", "jane doe")
    merge = [{"action": "merge_entities", "args": {"keep": str(a.id), "merge": str(b.id)}}]
    applied = curation_propose(
        principal=Principal(user=owner), project_id=project.id, changes=merge, summary="One"
    )
    change_set_decide(
        principal=Principal(user=editor), change_set_id=applied.id, approve=None, reject=[], edits={}
    )
    waiting = curation_propose(
        principal=Principal(user=owner),
        project_id=project.id,
        changes=[{"action": "update_entity", "args": {"entity_id": str(a.id), "description": "A person"}}],
        summary="Two",
    )
    url = f"/projects/{project.id}/graph/change-sets"

    html = _client(editor).get(url).content.decode()
    stranger_page = _client(stranger).get(url)

    rows = re.findall(
        r'<tr class="change-set" data-change-set-id="([^"]+)" data-status="(\w+)">(.*?)</tr>', html, re.S
    )
    assert [(r[0], r[1]) for r in rows] == [(str(waiting.id), "review"), (str(applied.id), "applied")]
    assert f'data-url="/api/change-sets/{waiting.id}/decision"' in rows[0][2] and ">Approve<" in rows[0][2]
    assert f'data-url="/api/change-sets/{applied.id}/undo"' in rows[1][2]
    assert stranger_page.status_code == 404


@pytest.mark.parametrize(
    ("path", "bad", "params"),
    [
        ("graph", "q", {"q": "a\x00b"}),
        ("graph", "type", {"type": "\x00"}),
        ("graph", "after", {"after": "x\x00"}),
        ("graph/queues", "cursor", {"kind": "orphans", "cursor": "\x00"}),
        ("graph/change-sets", "x", {"x": "\x00"}),
        ("ontology", "q", {"q": "\x00"}),
    ],
)
def test_a_nul_in_a_graph_pages_query_is_a_400_page_naming_it_not_a_500(path, bad, params):
    owner = make_user()
    project = make_project(owner)

    response = _client(owner).get(f"/projects/{project.id}/{path}", params)

    assert response.status_code == 400
    assert bad in response.content.decode()


def test_the_graph_pages_share_one_page_header_and_the_queues_and_change_sets_tabs_are_the_same():
    owner = make_user()
    project = make_project(owner, name="Atlas")
    entity = make_entity(project, "a", "Person", "Jane Doe")
    client = _client(owner)
    base = f"/projects/{project.id}"
    pages = {
        "graph": f"{base}/graph",
        "entity": f"{base}/graph/entities/{entity.id}",
        "queues": f"{base}/graph/queues",
        "change-sets": f"{base}/graph/change-sets",
        "ontology": f"{base}/ontology",
    }

    headers = {
        name: re.findall(
            r'<header class="page-header">(.*?)</header>', client.get(url).content.decode(), re.S
        )
        for name, url in pages.items()
    }

    assert all(len(found) == 1 and "<h1" in found[0] for found in headers.values()), headers
    assert ">Graph of Atlas</h1>" in headers["graph"][0] and ">Jane Doe</h1>" in headers["entity"][0]
    assert ">Ontology</h1>" in headers["ontology"][0]

    def tabs(html: str) -> list[str]:
        return re.findall(r'<a [^>]*id="(tab-[\w-]+)"', html)

    assert (
        tabs(headers["queues"][0])
        == tabs(headers["change-sets"][0])
        == [
            "tab-orphans",
            "tab-duplicates",
            "tab-unsupported",
            "tab-ontology-violations",
            "tab-change-sets",
        ]
    )

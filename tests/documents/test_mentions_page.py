"""The page of a document's mentions (issue #48 deliverable 3): its names grouped, each linked to
its entity or shown as a candidate with how many passages mention it; paged, escaped, members only."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from apps.documents.services import document_upload
from apps.documents.views import NAMES_PER_PAGE
from tests.factories import add_member, make_entity, make_project, make_user

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _rows(html: str) -> dict[str, str]:
    """Each name's row of the table, by its first spelling."""
    rows = re.findall(r'<tr class="mention-name".*?</tr>', html, flags=re.S)
    return {re.search(r'<td class="surface">(.*?)</td>', r).group(1): r for r in rows}


def test_a_member_sees_each_name_once_with_its_entity_or_candidate_and_its_passage_count():
    owner, viewer = make_user(), make_user()
    project = make_project(owner)
    add_member(project, viewer, "viewer")
    lisbon = make_entity(project, "lisbon", "City", "Lisbon", properties={"aliases": ["Lisboa"]})
    document = document_upload(
        project=project,
        name="trip.txt",
        data=b"We flew to Lisboa and met Ana Teixeira.\n\nAna Teixeira showed us Lisboa.\n\nLisboa again.",
    ).document

    page = _client(viewer).get(f"/projects/{project.id}/documents/{document.id}/mentions")

    html = page.content.decode()
    rows = _rows(html)
    assert page.status_code == 200
    assert list(rows) == ["Lisboa", "Ana Teixeira"]
    assert f'href="/chat/?project={project.id}#entity-{lisbon.id}"' in rows["Lisboa"]
    assert '<td class="count passages">3</td>' in rows["Lisboa"]
    assert 'data-linked="false"' in rows["Ana Teixeira"] and "candidate" in rows["Ana Teixeira"]
    assert '<td class="count passages">2</td>' in rows["Ana Teixeira"]
    assert "We flew to <mark>Lisboa</mark> and met Ana" in rows["Lisboa"]


def test_passage_text_on_the_page_is_escaped():
    owner = make_user()
    project = make_project(owner)
    text = 'Then <script>alert(1)</script> met Ana Teixeira "<img src=x onerror=alert(2)>" there.'
    document = document_upload(project=project, name="<svg onload=alert(3)>.txt", data=text.encode()).document

    html = _client(owner).get(f"/projects/{project.id}/documents/{document.id}/mentions").content.decode()

    assert "<script>alert" not in html and "<img src=x" not in html and "<svg" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; met <mark>Ana Teixeira</mark>" in html
    assert "<h1>Mentions in &lt;svg onload=alert(3)&gt;.txt</h1>" in html


def test_a_document_with_many_names_is_shown_a_page_at_a_time():
    owner = make_user()
    project = make_project(owner)
    names = [f"Person Number{chr(65 + i // 26)}{chr(97 + i % 26)}" for i in range(NAMES_PER_PAGE + 5)]
    data = "\n\n".join(f"{name} was here." for name in names).encode()
    document = document_upload(project=project, name="crowd.txt", data=data).document
    url = f"/projects/{project.id}/documents/{document.id}/mentions"

    first = _client(owner).get(url)
    second = _client(owner).get(url + "?page=2")
    past = _client(owner).get(url + "?page=3")
    bad = [_client(owner).get(url + f"?page={p}").status_code for p in ("0", "-1", "x", "1.5", "9" * 30)]

    assert len(_rows(first.content.decode())) == NAMES_PER_PAGE
    assert 'href="?page=2" rel="next"' in first.content.decode()
    assert len(_rows(second.content.decode())) == 5
    assert "Page 2 of 2" in second.content.decode()
    assert past.status_code == 404 and "There is no page 3" in past.content.decode()
    assert bad == [400] * 5


def test_someone_who_is_not_a_member_or_asks_for_another_projects_document_gets_404():
    owner, stranger = make_user(), make_user()
    project, other = make_project(owner), make_project(owner)
    document = document_upload(project=project, name="a.txt", data=b"Ana Teixeira.").document

    stranger_page = _client(stranger).get(f"/projects/{project.id}/documents/{document.id}/mentions")
    wrong_project = _client(owner).get(f"/projects/{other.id}/documents/{document.id}/mentions")
    logged_out = Client().get(f"/projects/{project.id}/documents/{document.id}/mentions")

    assert (stranger_page.status_code, wrong_project.status_code) == (404, 404)
    assert logged_out.status_code == 302 and "/accounts/login/" in logged_out["location"]

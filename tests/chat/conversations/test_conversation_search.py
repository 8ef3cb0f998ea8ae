"""Conversation search (issue #14 item 2): GET /api/chat/conversations?q= over my titles and messages."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client

from apps.chat.conversations.search import snippet_html
from apps.graph_tools.text_search import tsvector_sql, websearch_tsquery_sql
from apps.projects.selectors import Principal
from apps.projects.services import member_remove
from tests.factories import add_member, make_conversation, make_project, make_token, make_user

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def search(client: Client, q: str, **params):
    return client.get("/api/chat/conversations", {"q": q, **params})


def test_search_finds_a_conversation_by_a_word_of_an_answer_with_the_word_marked():
    user = make_user()
    project = make_project(owner=user)
    hit = make_conversation(
        user, project, "Trip", [("user", "Where to go?"), ("assistant", "Visit the lighthouses of Brittany.")]
    )
    make_conversation(user, project, "Other", [("user", "Nothing related"), ("assistant", "Indeed.")])

    body = search(client_for(user), "lighthouse").json()

    assert body["count"] == 1
    assert body["items"][0]["id"] == str(hit.id)
    assert "<mark>lighthouses</mark>" in body["items"][0]["snippet"]
    assert set(body["items"][0]) == {
        "id",
        "projectId",
        "title",
        "agentDefinitionId",
        "createdAt",
        "updatedAt",
        "snippet",
    }


def test_search_matches_titles_and_ranks_by_relevance_then_recency():
    user = make_user()
    project = make_project(owner=user)
    once = make_conversation(user, project, "Budget", [("user", "the budget for paris")])
    older_twice = make_conversation(user, project, "Paris trip", [("user", "paris paris paris in spring")])
    newer_twice = make_conversation(user, project, "Paris trip", [("user", "paris paris paris in spring")])

    items = search(client_for(user), "paris").json()["items"]

    assert [i["id"] for i in items] == [str(newer_twice.id), str(older_twice.id), str(once.id)]


def test_search_shows_only_my_conversations_in_projects_i_can_still_see():
    me, other = make_user(), make_user()
    project = make_project(owner=other)
    add_member(project, me, "viewer")
    mine = make_conversation(me, project, "", [("user", "zeppelin question")])
    make_conversation(other, project, "", [("user", "zeppelin question")])
    left_project = make_project(owner=other)
    add_member(left_project, me, "viewer")
    make_conversation(me, left_project, "", [("user", "zeppelin again")])
    member_remove(principal=Principal(user=me), project_ref=str(left_project.id), user_id=me.pk)

    body = search(client_for(me), "zeppelin").json()

    assert [i["id"] for i in body["items"]] == [str(mine.id)]
    assert body["count"] == 1


def test_search_with_a_project_bound_token_stays_in_that_project():
    me = make_user()
    a, b = make_project(owner=me), make_project(owner=me)
    in_a = make_conversation(me, a, "", [("user", "quokka")])
    make_conversation(me, b, "", [("user", "quokka")])
    client = Client(HTTP_AUTHORIZATION=f"Bearer {make_token(me, project=a)}")

    items = search(client, "quokka").json()["items"]

    assert [i["id"] for i in items] == [str(in_a.id)]


@pytest.mark.parametrize(
    "q",
    ['"unclosed', "a & | ! ( ) :* <-> b", "100%", "snake_case_", "or", "-", "x" * 1000, "''", "\\", "!!!"],
)
def test_search_strings_with_operators_quotes_wildcards_or_1000_characters_do_not_error(q):
    user = make_user()
    make_conversation(user, make_project(owner=user), "t", [("user", "hello world")])

    response = search(client_for(user), q)

    assert response.status_code == 200
    assert isinstance(response.json()["items"], list)


@pytest.mark.parametrize("q", ["x" * 1001, "bell\x07", "nul\x00", "esc\x1b[0m", "del\x7f"])
def test_search_string_too_long_or_with_control_characters_is_400_naming_q(q):
    user = make_user()

    response = search(client_for(user), q)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert response.json()["field"] == "q"


def test_blank_q_is_the_plain_list_and_pages_keep_count():
    user = make_user()
    project = make_project(owner=user)
    for n in range(3):
        make_conversation(user, project, f"c{n}", [("user", f"common word {n}")])
    client = client_for(user)

    blank = client.get("/api/chat/conversations", {"q": "  "}).json()
    page = search(client, "common", limit=1, offset=2).json()
    past_end = search(client, "common", limit=1, offset=5).json()

    assert blank["count"] == 3 and "snippet" not in blank["items"][0]
    assert page["count"] == 3 and len(page["items"]) == 1
    assert past_end == {"items": [], "count": 3}


def test_snippet_escapes_html_from_messages_and_marks_only_matches():
    user = make_user()
    make_conversation(
        user,
        make_project(owner=user),
        "",
        [("assistant", "if a < b && c > d the teapot <script>alert(1)</script>")],
    )

    snippet = search(client_for(user), "teapot").json()["items"][0]["snippet"]

    assert "<script>" not in snippet
    assert "a &lt; b &amp;&amp; c &gt; d" in snippet and "<mark>teapot</mark>" in snippet
    assert snippet_html("a \ue000b\ue001 <i>") == "a <mark>b</mark> &lt;i&gt;"


def test_words_inside_angle_brackets_find_a_message_and_a_title_whose_snippet_shows_the_brackets():
    user = make_user()
    project = make_project(owner=user)
    by_message = make_conversation(user, project, "Java", [("user", "How do I sort a List<Widget> by name?")])
    by_title = make_conversation(user, project, "Map<Gadget> notes", [("user", "Nothing else")])
    make_conversation(user, project, "Lists", [("user", "A shopping list")])
    client = client_for(user)

    widgets = search(client, "widgets").json()["items"]
    gadgets = search(client, "gadget").json()["items"]
    phrase = search(client, '"List<Widget>"').json()["items"]

    assert [i["id"] for i in widgets] == [str(by_message.id)]
    assert "a List&lt;<mark>Widget</mark>&gt; by name" in widgets[0]["snippet"]
    assert [i["id"] for i in gadgets] == [str(by_title.id)]
    assert gadgets[0]["snippet"] == "Map&lt;<mark>Gadget</mark>&gt; notes"
    assert [i["id"] for i in phrase] == [str(by_message.id)]


def test_search_uses_the_gin_indexes():
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT id FROM kb.chat_messages WHERE role IN ('user', 'assistant') AND "
            "search_vector @@ websearch_to_tsquery('english', 'x')"
        )
        messages_plan = " ".join(r[0] for r in cursor.fetchall())
        cursor.execute(
            "EXPLAIN SELECT id FROM kb.chat_conversations WHERE "
            f"{tsvector_sql('title')} @@ {websearch_tsquery_sql(repr('x'))}"
        )
        titles_plan = " ".join(r[0] for r in cursor.fetchall())

    assert "chat_msg_search_vector" in messages_plan
    assert "chat_conv_title_fts" in titles_plan

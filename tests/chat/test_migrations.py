"""The migration that makes conversations agent-backed (agent-backed-chat requirements)."""

import uuid

import pytest
from django.db import connection
from django.utils import timezone

from apps.graph_tools.text_search import tsvector_sql, websearch_tsquery_sql
from tests.support.migrations import migrate, migrate_to_latest

BEFORE = [("chat", "0001_initial")]
AFTER = [("chat", "0002_conversation_agent_definition")]


@pytest.fixture
def at_first_chat_migration(transactional_db):
    apps = migrate(BEFORE)
    yield apps
    migrate_to_latest()


def column(table: str, name: str):
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.data_type, c.is_nullable, ccu.table_schema, ccu.table_name, ccu.column_name
            FROM information_schema.columns c
            LEFT JOIN information_schema.key_column_usage kcu
                   ON kcu.table_schema = c.table_schema AND kcu.table_name = c.table_name
                  AND kcu.column_name = c.column_name
            LEFT JOIN information_schema.constraint_column_usage ccu
                   ON ccu.constraint_name = kcu.constraint_name AND ccu.table_schema = kcu.table_schema
            WHERE c.table_schema = 'kb' AND c.table_name = %s AND c.column_name = %s
            """,
            [table, name],
        )
        return cursor.fetchall()


def insert_conversations(apps, n: int) -> list[uuid.UUID]:
    User = apps.get_model("auth", "User")
    Project = apps.get_model("projects", "Project")
    Conversation = apps.get_model("chat", "Conversation")
    user = User.objects.create(username="legacy")
    project = Project.objects.create(name="Legacy", slug="legacy")
    now = timezone.now()
    return [
        Conversation.objects.create(
            project=project, user=user, title=f"old {i}", created_at=now, updated_at=now
        ).id
        for i in range(n)
    ]


def test_migration_adds_column(at_first_chat_migration):
    assert column("chat_conversations", "agent_definition_id") == []

    migrate(AFTER)

    assert column("chat_conversations", "agent_definition_id") == [
        ("uuid", "YES", "kb", "agent_definitions", "id")
    ]


def test_existing_conversations_unaffected(at_first_chat_migration):
    ids = insert_conversations(at_first_chat_migration, 3)

    apps = migrate(AFTER)

    Conversation = apps.get_model("chat", "Conversation")
    rows = list(Conversation.objects.filter(id__in=ids).values_list("title", "agent_definition_id"))
    assert sorted(rows) == [("old 0", None), ("old 1", None), ("old 2", None)]


def test_known_entities_are_backfilled_from_earlier_tool_results(transactional_db):
    apps = migrate([("chat", "0004_conversation_active_turn")])
    (conversation_id,) = insert_conversations(apps, 1)
    Message = apps.get_model("chat", "Message")
    paris = {"id": "11111111-1111-1111-1111-111111111111", "key": "paris", "type": "City", "name": "Paris"}
    Message.objects.create(
        conversation_id=conversation_id,
        role="tool",
        content="{}",
        tool_calls=[{"id": "c", "name": "hybrid_search", "output": {"results": [{**paris, "score": 1}]}}],
        created_at=timezone.now(),
    )

    try:
        apps = migrate([("chat", "0005_conversation_known_entities")])
        Conversation = apps.get_model("chat", "Conversation")

        assert Conversation.objects.get(id=conversation_id).known_entities == {paris["id"]: paris}
    finally:
        migrate_to_latest()


def test_search_migration_keeps_existing_messages_and_makes_them_searchable(transactional_db):
    apps = migrate([("chat", "0006_conversation_active_turn_text")])
    (conversation_id,) = insert_conversations(apps, 1)
    Message = apps.get_model("chat", "Message")
    Message.objects.create(
        conversation_id=conversation_id,
        role="assistant",
        content="An old answer about lighthouses",
        created_at=timezone.now(),
    )

    try:
        migrate([("chat", "0007_conversation_search_indexes")])
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT content FROM kb.chat_messages WHERE search_vector @@ websearch_to_tsquery('english', 'lighthouse')"
            )
            found = cursor.fetchall()

        assert found == [("An old answer about lighthouses",)]
    finally:
        migrate_to_latest()


def test_rebuilt_message_vectors_and_title_index_read_the_words_inside_angle_brackets(transactional_db):
    apps = migrate([("chat", "0011_active_turn_shown")])
    try:
        (conversation_id,) = insert_conversations(apps, 1)
        Conversation = apps.get_model("chat", "Conversation")
        Conversation.objects.filter(id=conversation_id).update(title="Map<Gadget> notes")
        apps.get_model("chat", "Message").objects.create(
            conversation_id=conversation_id,
            role="user",
            content="Sort a List<Widget>",
            created_at=timezone.now(),
        )

        migrate_to_latest()

        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT content FROM kb.chat_messages WHERE search_vector @@ {websearch_tsquery_sql(repr('widget'))}"
            )
            messages = cursor.fetchall()
            cursor.execute(
                "SELECT title FROM kb.chat_conversations "
                f"WHERE {tsvector_sql('title')} @@ {websearch_tsquery_sql(repr('gadget'))}"
            )
            titles = cursor.fetchall()
        assert messages == [("Sort a List<Widget>",)]
        assert titles == [("Map<Gadget> notes",)]
    finally:
        migrate_to_latest()

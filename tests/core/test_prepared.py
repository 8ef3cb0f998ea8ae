"""Query templates (apps/core/prepared.py): a queryset compiled once reads, for every new value,
exactly what the queryset built for that value reads; a build whose values are not plain
parameters is never reused. And ``rows_write``'s inserts are the statements Django would send."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from django.db import connection
from django.db.models import Count, Q
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.agents.models import AgentRun
from apps.chat.models import Conversation, Message, MessageRole
from apps.core.db import _insert_sql, _insert_sql_django, bound_cursor, rows_write
from apps.core.prepared import QueryTemplate
from apps.graph_tools.versions import graph_version_value
from apps.projects.models import Project
from tests.factories import make_agent_definition, make_conversation, make_project, make_user

pytestmark = pytest.mark.django_db


def _definitions(*, project_id, owner_id):
    from apps.agents.models import AgentDefinition

    return (
        AgentDefinition.objects.select_related("project")
        .filter(project_id=project_id, project__memberships__user_id=owner_id)
        .annotate(member_count=Count("project__memberships"))
        .order_by("name")
    )


def test_a_template_reads_what_its_queryset_reads_for_each_new_value():
    template = QueryTemplate(_definitions)
    projects = []
    for n in range(3):
        project = make_project(name=f"templated {n}")
        make_agent_definition(project, name=f"agent {n}a")
        make_agent_definition(project, name=f"agent {n}b")
        projects.append(project)

    for project in [*projects, projects[0]]:
        owner = project.memberships.get().user_id
        got = template.rows(project_id=project.id, owner_id=owner)
        want = list(_definitions(project_id=project.id, owner_id=owner))

        assert [(d.id, d.name, d.tools, d.model, d.member_count) for d in got] == [
            (d.id, d.name, d.tools, d.model, d.member_count) for d in want
        ]
        assert [d.project.name for d in got] == [project.name, project.name]
    # Another user: nothing, through the same kept statement.
    assert template.rows(project_id=projects[0].id, owner_id=make_user().pk) == []


def test_a_kept_template_sends_one_statement_without_building_the_queryset_again():
    builds = []

    def build(*, project_id):
        builds.append(project_id)
        return Project.objects.filter(id=project_id)

    template = QueryTemplate(build, first=True)
    first, second = make_project(), make_project()
    assert template.first(project_id=first.id) == first
    built = len(builds)

    with CaptureQueriesContext(connection) as sent:
        found = template.first(project_id=second.id)

    assert found == second
    assert len(builds) == built
    # One statement, its value sent apart from it (server-side binding: ``core.db.bound_cursor``).
    [statement] = [q["sql"] for q in sent.captured_queries]
    assert Project._meta.db_table in statement and second.id.hex not in statement


def test_a_value_the_query_transforms_is_no_parameter_and_the_queryset_is_built_each_time():
    template = QueryTemplate(lambda *, part: Project.objects.filter(name__icontains=part).order_by("name"))
    make_project(name="Alpha one")
    make_project(name="Beta two")

    assert [p.name for p in template.rows(part="alpha")] == ["Alpha one"]
    assert [p.name for p in template.rows(part="BETA")] == ["Beta two"]


def test_a_builder_that_reads_the_clock_itself_is_run_every_time():
    since = timezone.now()
    template = QueryTemplate(
        lambda *, after: Project.objects.filter(created_at__gte=after, created_at__lte=timezone.now())
    )
    assert template.rows(after=since) == []

    project = make_project()

    assert template.rows(after=since) == [project]


def test_values_of_other_types_are_part_of_the_shape():
    template = QueryTemplate(
        lambda *, conversation_id, before: Message.objects.filter(
            Q(conversation_id=conversation_id) & (Q(created_at__lt=before) if before else Q())
        ).order_by("created_at")
    )
    user = make_user()
    conversation = make_conversation(
        user, make_project(owner=user), messages=[("user", "a"), ("assistant", "b")]
    )
    newest = Message.objects.filter(conversation=conversation).order_by("created_at").last()

    assert [m.content for m in template.rows(conversation_id=conversation.id, before=None)] == ["a", "b"]
    assert [m.content for m in template.rows(conversation_id=conversation.id, before=newest.created_at)] == [
        "a"
    ]


def _comparable(statement):
    """A statement with its JSON parameters as their values and its times as "a time" (an
    ``auto_now_add`` field takes the clock's time at each compile)."""
    sql, params = statement
    return sql, [getattr(p, "obj", p) if not isinstance(p, datetime) else "a time" for p in params]


def test_the_insert_of_a_row_is_the_statement_django_sends():
    user = make_user()
    project = make_project(owner=user)
    definition = make_agent_definition(project)
    now = timezone.now()
    conversation = Conversation(project=project, user_id=user.pk, title="t", agent_definition=definition)
    message = Message(conversation=conversation, role=MessageRole.USER, content="hi", created_at=now)
    run = AgentRun(
        id=uuid.uuid4(),
        project_id=project.id,
        agent_definition_id=definition.id,
        conversation_id=conversation.id,
        model="scripted/test",
        graph_version=graph_version_value(project.id),
    )
    for row in (conversation, message, run, conversation, message, run):  # the first of each compiles
        fields = [f for f in type(row)._meta.local_concrete_fields if not getattr(f, "generated", False)]

        assert _comparable(_insert_sql(row)) == _comparable(_insert_sql_django(row, fields))

    rows_write(inserts=[conversation, message, run])

    assert Message.objects.get(id=message.id).conversation_id == conversation.id
    assert AgentRun.objects.get(id=run.id).graph_version == 0


def test_the_bound_cursor_sends_values_apart_prepares_its_statement_once_and_gives_the_cursor_back():
    """Server-side binding, and with the pool (the settings a user gets) the statement prepared on
    the connection, once: PostgreSQL then stops planning it again. (Without the pool, behind a
    PgBouncer, nothing is prepared: tests/test_db_pool.py.)"""
    with CaptureQueriesContext(connection) as sent:
        for n in range(10):
            with bound_cursor() as cursor:
                cursor.execute("SELECT %s::int + 1", [12340 + n])
                assert cursor.fetchone() == (12341 + n,)
    # The value travelled apart from the statement (client-side binding would have quoted it in).
    assert all("1234" not in q["sql"] for q in sent.captured_queries)

    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%%::int + 1'")
        assert cursor.fetchall() == [("SELECT $1::int + 1",)]
        assert type(cursor.cursor).__name__ == "Cursor"  # Django's client-side cursor, as before

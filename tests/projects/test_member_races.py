"""Concurrent membership changes: the project row lock keeps the last owner (issue 14, item 1)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, transaction

from apps.projects.models import Project, ProjectMembership
from apps.projects.selectors import Principal
from apps.projects.services import LastOwner, member_role_set
from tests.factories import add_member, make_project, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return bool(cursor.fetchone()[0])


def test_two_owners_demoting_each_other_at_once_leave_one_owner():
    ann, bob = make_user("ann"), make_user("bob")
    project = make_project(owner=ann)
    add_member(project, bob, "owner")
    locked, proceed = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def ann_demotes_bob() -> None:
        try:
            with transaction.atomic():
                Project.objects.select_for_update().filter(pk=project.pk).first()
                locked.set()
                proceed.wait()
                member_role_set(
                    principal=Principal(user=ann), project_ref=project.id, user_id=bob.pk, role="viewer"
                )
            outcome["ann"] = "done"
        finally:
            connections.close_all()

    def bob_demotes_ann() -> None:
        try:
            member_role_set(
                principal=Principal(user=bob), project_ref=project.id, user_id=ann.pk, role="viewer"
            )
            outcome["bob"] = "done"
        except LastOwner as exc:
            outcome["bob"] = exc.code
        finally:
            connections.close_all()

    first = threading.Thread(target=ann_demotes_bob)
    first.start()
    assert locked.wait(30)
    second = threading.Thread(target=bob_demotes_ann)
    second.start()
    deadline = time.monotonic() + 30  # a bound on the wait, not a measurement
    while not waiting_on_a_lock() and second.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    blocked = waiting_on_a_lock()
    proceed.set()
    first.join(30)
    second.join(30)

    assert blocked, "the second change did not wait for the first one's lock"
    assert outcome == {"ann": "done", "bob": "last_owner"}
    roles = dict(ProjectMembership.objects.filter(project=project).values_list("user__username", "role"))
    assert roles == {"ann": "owner", "bob": "viewer"}

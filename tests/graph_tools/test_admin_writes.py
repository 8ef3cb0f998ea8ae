"""Admin edits of the graph go through the write services (issue 15 follow-up): each one bumps the
graph version and records a GraphChange by the staff user; a refused one is a form error and
writes nothing."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.graph_tools.models import GraphChange, GraphObject, GraphRelationship
from apps.graph_tools.versions import graph_version_current
from tests.factories import make_entity, make_project, make_relationship

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff():
    return get_user_model().objects.create_superuser("root", "", "pw-root-123")


@pytest.fixture
def admin_client(staff):
    client = Client()
    client.force_login(staff)
    return client


@pytest.fixture
def graph():
    project = make_project()
    paris = make_entity(project, "paris", type="City", name="Paris", properties={"population": 2})
    france = make_entity(project, "france", type="Country", name="France")
    rel = make_relationship(project, paris, "CAPITAL_OF", france)
    return {"project": project, "paris": paris, "france": france, "rel": rel}


def entity_form(entity, **changes):
    data = {
        "name": entity.name,
        "description": entity.description,
        "properties": json.dumps(entity.properties),
    }
    return data | changes


def test_admin_edit_of_an_entity_runs_update_entity_bumps_the_version_and_records_the_change(
    admin_client, staff, graph
):
    paris = graph["paris"]

    response = admin_client.post(
        f"/admin/graph_tools/graphobject/{paris.id}/change/",
        entity_form(paris, name="Paris, France", properties=json.dumps({"mayor": "Anne"})),
    )

    assert response.status_code == 302
    paris.refresh_from_db()
    assert (paris.name, paris.properties) == ("Paris, France", {"mayor": "Anne"})
    assert graph_version_current(project_id=graph["project"].id) == 1
    change = GraphChange.objects.get()
    assert (change.action, change.entity_id, change.user_id, change.authority, change.version) == (
        "update_entity",
        paris.id,
        staff.id,
        "direct",
        1,
    )
    assert change.before["name"] == "Paris" and change.after["name"] == "Paris, France"


def test_admin_save_that_changes_nothing_writes_nothing(admin_client, graph):
    paris = graph["paris"]

    response = admin_client.post(f"/admin/graph_tools/graphobject/{paris.id}/change/", entity_form(paris))

    assert response.status_code == 302
    assert graph_version_current(project_id=graph["project"].id) == 0
    assert not GraphChange.objects.exists()


def test_admin_added_entity_is_created_by_create_entity(admin_client, staff, graph):
    response = admin_client.post(
        "/admin/graph_tools/graphobject/add/",
        {
            "project": graph["project"].id,
            "key": "lyon",
            "type": "City",
            "name": "Lyon",
            "description": "",
            "properties": "{}",
        },
    )

    assert response.status_code == 302
    lyon = GraphObject.objects.get(key="lyon")
    change = GraphChange.objects.get()
    assert (change.action, change.entity_id, change.user_id) == ("create_entity", lyon.id, staff.id)
    assert graph_version_current(project_id=graph["project"].id) == 1


def test_admin_entity_with_a_taken_key_is_a_form_error_and_nothing_is_written(admin_client, graph):
    response = admin_client.post(
        "/admin/graph_tools/graphobject/add/",
        {
            "project": graph["project"].id,
            "key": "paris",
            "type": "City",
            "name": "Another Paris",
            "description": "",
            "properties": "{}",
        },
    )

    assert response.status_code == 200
    assert "already exists" in response.content.decode()
    assert GraphObject.objects.filter(key="paris").count() == 1
    assert graph_version_current(project_id=graph["project"].id) == 0


def test_admin_delete_of_an_entity_runs_delete_entity_and_records_its_relationships(
    admin_client, staff, graph
):
    paris = graph["paris"]

    response = admin_client.post(f"/admin/graph_tools/graphobject/{paris.id}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not GraphObject.objects.filter(id=paris.id).exists()
    actions = sorted(GraphChange.objects.values_list("action", flat=True))
    assert actions == ["delete_entity", "delete_relationship"]
    assert set(GraphChange.objects.values_list("user_id", "version")) == {(staff.id, 1)}


def test_admin_bulk_delete_runs_delete_entity_once_per_entity(admin_client, graph):
    ids = [graph["paris"].id, graph["france"].id]

    response = admin_client.post(
        "/admin/graph_tools/graphobject/",
        {"action": "delete_selected", "_selected_action": [str(i) for i in ids], "post": "yes"},
    )

    assert response.status_code == 302
    assert not GraphObject.objects.filter(id__in=ids).exists()
    assert GraphChange.objects.filter(action="delete_entity").count() == 2
    assert graph_version_current(project_id=graph["project"].id) == 2


def test_admin_relationship_is_added_and_deleted_through_the_write_services(admin_client, graph):
    project, paris, france = graph["project"], graph["paris"], graph["france"]

    added = admin_client.post(
        "/admin/graph_tools/graphrelationship/add/",
        {"project": project.id, "src": france.id, "type": "HAS_CITY", "dst": paris.id, "properties": "{}"},
    )
    rel = GraphRelationship.objects.get(type="HAS_CITY")
    deleted = admin_client.post(f"/admin/graph_tools/graphrelationship/{rel.id}/delete/", {"post": "yes"})

    assert (added.status_code, deleted.status_code) == (302, 302)
    assert not GraphRelationship.objects.filter(type="HAS_CITY").exists()
    assert list(GraphChange.objects.order_by("version").values_list("action", "version")) == [
        ("create_relationship", 1),
        ("delete_relationship", 2),
    ]


def test_admin_relationship_to_an_entity_of_another_project_is_a_form_error(admin_client, graph):
    elsewhere = make_entity(make_project(), "rome", type="City", name="Rome")

    response = admin_client.post(
        "/admin/graph_tools/graphrelationship/add/",
        {
            "project": graph["project"].id,
            "src": graph["paris"].id,
            "type": "TWINNED_WITH",
            "dst": elsewhere.id,
            "properties": "{}",
        },
    )

    assert response.status_code == 200
    assert not GraphRelationship.objects.filter(type="TWINNED_WITH").exists()
    assert not GraphChange.objects.exists()


def test_admin_cannot_edit_a_relationship_in_place(admin_client, graph):
    rel = graph["rel"]

    response = admin_client.post(
        f"/admin/graph_tools/graphrelationship/{rel.id}/change/",
        {
            "project": graph["project"].id,
            "src": rel.dst_id,
            "type": "X",
            "dst": rel.src_id,
            "properties": "{}",
        },
    )

    assert response.status_code == 403
    rel.refresh_from_db()
    assert rel.type == "CAPITAL_OF" and not GraphChange.objects.exists()


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize("form", ["entity-add", "entity-change", "relationship-add"])
def test_admin_properties_with_a_non_finite_number_are_a_form_error_naming_it_and_nothing_is_written(
    admin_client, graph, number, form
):
    project, paris, france = graph["project"], graph["paris"], graph["france"]
    properties = '{"population": {"2020": ' + number + "}}"
    path, data = {
        "entity-add": (
            "/admin/graph_tools/graphobject/add/",
            {"project": project.id, "key": "lyon", "type": "City", "name": "Lyon", "description": ""},
        ),
        "entity-change": (f"/admin/graph_tools/graphobject/{paris.id}/change/", entity_form(paris)),
        "relationship-add": (
            "/admin/graph_tools/graphrelationship/add/",
            {"project": project.id, "src": france.id, "type": "HAS_CITY", "dst": paris.id},
        ),
    }[form]

    response = admin_client.post(path, {**data, "properties": properties})

    assert response.status_code == 200
    assert "population.2020 is not a finite number" in response.content.decode()
    paris.refresh_from_db()
    assert paris.properties == {"population": 2}
    assert not GraphObject.objects.filter(key="lyon").exists()
    assert not GraphRelationship.objects.filter(type="HAS_CITY").exists()
    assert not GraphChange.objects.exists()

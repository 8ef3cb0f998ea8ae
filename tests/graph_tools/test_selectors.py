"""Reads of the graph (apps/graph_tools/selectors.py): the one id-or-key resolver, browsing by members."""

import pytest

from apps.graph_tools.errors import EntityNotFound
from apps.graph_tools.selectors import entity_detail, entity_resolve
from apps.projects.selectors import Principal, ProjectNotFound
from tests.factories import make_entity, make_project, make_relationship, make_user

pytestmark = pytest.mark.django_db


def test_entity_resolve_resolves_an_entity_by_its_id_and_by_its_key():
    project = make_project()
    paris = make_entity(project, "paris", type="City", name="Paris")

    by_id = entity_resolve(project_id=project.id, ref=str(paris.id))
    by_key = entity_resolve(project_id=project.id, ref="paris")

    assert by_id == by_key
    assert (by_id["id"], by_id["key"], by_id["name"]) == (str(paris.id), "paris", "Paris")


def test_an_id_wins_over_a_key_that_spells_another_entitys_id():
    project = make_project()
    target = make_entity(project, "target", name="Target (first version)")
    make_entity(project, str(target.id), name="Impostor")  # a key that reads as the other's id
    target.name = "Target"
    target.save()  # its new row version now lies after the impostor's: order alone would pick wrong

    found = entity_resolve(project_id=project.id, ref=str(target.id))

    assert found["name"] == "Target"


def test_entity_resolve_never_resolves_another_projects_entity_by_id_or_key():
    project, other = make_project(), make_project()
    theirs = make_entity(other, "theirs")

    for ref in (str(theirs.id), "theirs"):
        with pytest.raises(EntityNotFound) as missing:
            entity_resolve(project_id=project.id, ref=ref)

        assert missing.value.status == 404 and missing.value.code == "entity_not_found"


def test_entity_detail_lists_edges_both_ways_for_a_member_and_is_project_not_found_for_others():
    owner, stranger = make_user(), make_user()
    project = make_project(owner=owner)
    paris, france = make_entity(project, "paris"), make_entity(project, "france")
    make_relationship(project, paris, "CAPITAL_OF", france)

    detail = entity_detail(principal=Principal(user=owner), project_ref=project.slug, ref="france")
    with pytest.raises(ProjectNotFound):
        entity_detail(principal=Principal(user=stranger), project_ref=project.slug, ref="france")

    assert [(e.type, e.direction, e.other.key) for e in detail.edges] == [("CAPITAL_OF", "in", "paris")]

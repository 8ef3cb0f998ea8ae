"""Reads of the graph (apps/graph_tools/selectors.py): the one id-or-key resolver, browsing by members."""

import pytest

from apps.graph_tools.errors import EntityNotFound
from apps.graph_tools.selectors import entity_detail, entity_resolve, relationship_value_names
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


def test_relationship_value_names_lists_each_relationships_most_reached_targets_first():
    project, other = make_project(), make_project()
    drama, comedy = make_entity(project, "drama", name="Drama"), make_entity(project, "comedy", name="Comedy")
    films = [make_entity(project, f"film-{i}", type="Movie") for i in range(3)]
    for film in films:
        make_relationship(project, film, "HAS_GENRE", drama)
    make_relationship(project, films[0], "HAS_GENRE", comedy)
    ann = make_entity(project, "ann", type="Person", name="Ann Lee")
    make_relationship(project, films[1], "DIRECTED_BY", ann)
    theirs = make_entity(other, "theirs", name="Not Mine")
    make_relationship(other, make_entity(other, "their-film"), "HAS_GENRE", theirs)

    names = relationship_value_names(project_id=project.id)
    fewer = relationship_value_names(project_id=project.id, per_type=1)

    assert names == {"DIRECTED_BY": ("Ann Lee",), "HAS_GENRE": ("Drama", "Comedy")}
    assert fewer["HAS_GENRE"] == ("Drama",)

"""merge_entities as a curation change set (#51): the relationships re-pointed, their duplicates
collapsed, the loser's names kept as aliases, one graph version; an old answer citing the loser
still opens the winner and is marked stale; undoing the merge restores what it changed; a merge
already proposed and waiting for review is not proposed twice."""

from __future__ import annotations

import pytest

from apps.graph_tools.models import EntityRedirect, GraphChange, GraphObject, GraphRelationship
from apps.graph_tools.versions import graph_version_current
from tests.curation.conftest import Curators
from tests.factories import make_conversation, make_entity

pytestmark = pytest.mark.django_db

MERGE = [{"action": "merge_entities", "args": {"keep": "ada", "merge": "ada2"}}]


def edges(c: Curators) -> set[tuple[str, str, str]]:
    rels = GraphRelationship.objects.filter(project=c.project).select_related("src", "dst")
    return {(r.src.key, r.type, r.dst.key) for r in rels}


def merged(c: Curators) -> dict:
    proposed = c.propose(c.editor, MERGE, summary="Ada twice")
    assert proposed.status_code == 201, proposed.json()
    decided = c.decide(c.owner, proposed.json()["id"])
    assert decided.status_code == 200, decided.json()
    return decided.json()


def test_merge_repoints_relationships_collapses_duplicates_and_keeps_the_names_as_aliases(curators: Curators):
    c = curators
    knows = GraphRelationship.objects.get(src=c.e["ada"], type="KNOWS")
    lives = GraphRelationship.objects.get(src=c.e["ada2"], type="LIVES_IN")

    applied = merged(c)

    assert applied["status"] == "applied" and applied["items"][0]["status"] == "applied"
    assert not GraphObject.objects.filter(id=c.e["ada2"].id).exists()
    assert edges(c) == {
        ("ada", "KNOWS", "babbage"),
        ("ada", "LIVES_IN", "london"),
        ("engine", "DESIGNED_BY", "ada"),
    }
    assert GraphRelationship.objects.get(src=c.e["ada"], type="KNOWS").id == knows.id
    assert GraphRelationship.objects.get(src=c.e["ada"], type="LIVES_IN").id == lives.id
    ada = GraphObject.objects.get(id=c.e["ada"].id)
    assert ada.properties["aliases"] == ["A. Lovelace", "Augusta Ada King"]
    assert graph_version_current(project_id=c.project.id) == 1 == applied["graphVersion"]
    changes = GraphChange.objects.filter(project=c.project)
    assert {(ch.action, ch.authority, ch.version) for ch in changes} == {("merge_entities", "curation", 1)}
    assert (
        changes.filter(entity_id=c.e["ada2"].id).exists() and changes.filter(entity_id=c.e["ada"].id).exists()
    )
    assert changes.count() == 2 + 4


def test_merged_entity_found_by_its_alias_through_search_entities(curators: Curators):
    from tests.graph_tools.conftest import call_tool

    c = curators
    merged(c)

    found = call_tool(c.project, "search_entities", query="Augusta Ada King")["results"]

    assert [r["key"] for r in found] == ["ada"]


def test_an_old_answer_citing_the_merged_entity_opens_the_winner_and_is_marked_stale(curators: Curators):
    c = curators
    user = c.project.memberships.get(role="editor").user
    conversation = make_conversation(user, c.project, messages=[("user", "Who wrote the first program?")])
    loser = c.e["ada2"]
    conversation.messages.create(
        role="assistant",
        content=f"[A. Lovelace](entity:{loser.id}) did.",
        citations=[{"id": str(loser.id), "key": "ada2", "type": "Person", "name": "A. Lovelace"}],
        retrieval_context={"graph_version": 0, "entity_ids": [str(loser.id)]},
    )
    fresh = c.editor.get(f"/api/chat/conversations/{conversation.id}").json()

    merged(c)
    cited = c.editor.get(f"/api/projects/{c.project.id}/graph/entities/{loser.id}")
    by_key = c.editor.get(f"/api/projects/{c.project.id}/graph/entities/ada2")
    history = c.editor.get(f"/api/chat/conversations/{conversation.id}").json()

    assert fresh["messages"][1]["stale"] is False
    assert cited.status_code == 200 and cited.json()["id"] == str(c.e["ada"].id)
    assert cited.json()["mergedFrom"] == str(loser.id)
    assert by_key.json()["id"] == str(c.e["ada"].id)
    answer = history["messages"][1]
    assert answer["stale"] is True
    assert {ch["action"] for ch in answer["graphChanged"]["changes"]} == {"merge_entities"}
    assert EntityRedirect.objects.get(merged_id=loser.id).into == c.e["ada"].id


def test_a_later_merge_of_the_winner_still_resolves_the_first_loser(curators: Curators):
    c = curators
    merged(c)
    again = c.propose(
        c.editor, [{"action": "merge_entities", "args": {"keep": "babbage", "merge": "ada"}}]
    ).json()
    c.decide(c.owner, again["id"])

    cited = c.editor.get(f"/api/projects/{c.project.id}/graph/entities/{c.e['ada2'].id}")

    assert cited.json()["id"] == str(c.e["babbage"].id)


def test_undo_of_a_merge_restores_the_loser_its_relationships_and_the_winners_aliases(curators: Curators):
    c = curators
    before = edges(c)
    applied = merged(c)

    undo = c.editor.post(f"/api/change-sets/{applied['id']}/undo")
    decided = c.decide(c.owner, undo.json()["id"])

    assert undo.status_code == 201, undo.json()
    assert undo.json()["items"][0]["action"] == "unmerge_entities"
    assert decided.status_code == 200 and decided.json()["status"] == "applied"
    restored = GraphObject.objects.get(id=c.e["ada2"].id)
    assert (restored.key, restored.name) == ("ada2", "A. Lovelace")
    assert restored.properties == {"aliases": ["Augusta Ada King"], "born": 1815}
    assert "aliases" not in GraphObject.objects.get(id=c.e["ada"].id).properties
    assert edges(c) == before
    assert GraphRelationship.objects.get(src=c.e["ada2"], type="KNOWS").properties == {"since": 1833}
    assert not EntityRedirect.objects.filter(merged_id=c.e["ada2"].id).exists()
    assert graph_version_current(project_id=c.project.id) == 2
    cited = c.editor.get(f"/api/projects/{c.project.id}/graph/entities/{c.e['ada2'].id}").json()
    assert cited["id"] == str(c.e["ada2"].id) and cited["mergedFrom"] is None


def test_undo_of_the_undo_merges_again(curators: Curators):
    c = curators
    applied = merged(c)
    undo = c.editor.post(f"/api/change-sets/{applied['id']}/undo").json()
    c.decide(c.owner, undo["id"])

    redo = c.editor.post(f"/api/change-sets/{undo['id']}/undo").json()
    c.decide(c.owner, redo["id"])

    assert redo["items"][0]["action"] == "merge_entities"
    assert not GraphObject.objects.filter(id=c.e["ada2"].id).exists()
    assert ("ada", "LIVES_IN", "london") in edges(c)


def test_the_mention_index_names_of_the_merged_entity_follow_the_merge_and_its_undo(curators: Curators):
    from apps.documents.models import MentionName

    c = curators
    name = MentionName.objects.create(
        project=c.project, normalised="a. lovelace", name="A. Lovelace", entity=c.e["ada2"]
    )
    applied = merged(c)
    after_merge = MentionName.objects.get(id=name.id).entity_id

    undo = c.editor.post(f"/api/change-sets/{applied['id']}/undo").json()
    c.decide(c.owner, undo["id"])

    assert after_merge == c.e["ada"].id
    assert MentionName.objects.get(id=name.id).entity_id == c.e["ada2"].id


def test_the_winner_takes_the_losers_description_when_it_has_none_and_the_properties_it_lacks(
    curators: Curators,
):
    c = curators
    GraphObject.objects.filter(id=c.e["ada"].id).update(description="", properties={"field": "maths"})

    applied = merged(c)

    ada = GraphObject.objects.get(id=c.e["ada"].id)
    assert ada.description == "Wrote the first program."
    assert ada.properties == {"field": "maths", "born": 1815, "aliases": ["A. Lovelace", "Augusta Ada King"]}
    assert ada.embedding_pending is True
    fields = {ch["field"] for ch in applied["items"][0]["result"]["changes"]}
    assert {"description", "properties.born"} <= fields


def test_the_winners_own_description_and_property_values_win_over_the_losers(curators: Curators):
    c = curators
    GraphObject.objects.filter(id=c.e["ada"].id).update(properties={"born": 1816})

    merged(c)

    ada = GraphObject.objects.get(id=c.e["ada"].id)
    assert ada.description == "Mathematician."
    assert ada.properties["born"] == 1816


def test_undo_of_a_merge_gives_the_winner_back_its_description_and_properties_as_they_were(
    curators: Curators,
):
    c = curators
    GraphObject.objects.filter(id=c.e["ada"].id).update(description="", properties={"field": "maths"})
    applied = merged(c)

    undo = c.editor.post(f"/api/change-sets/{applied['id']}/undo")
    c.decide(c.owner, undo.json()["id"])

    ada = GraphObject.objects.get(id=c.e["ada"].id)
    assert (ada.description, ada.properties) == ("", {"field": "maths"})
    restored = GraphObject.objects.get(id=c.e["ada2"].id)
    assert restored.description == "Wrote the first program."
    assert restored.properties == {"aliases": ["Augusta Ada King"], "born": 1815}


def test_a_merge_a_change_set_in_review_proposes_already_is_a_409_naming_it_and_the_queue_says_so(
    curators: Curators,
):
    c = curators
    twin = make_entity(c.project, "ada3", "Person", "Ada Lovelace")
    queue = f"/api/projects/{c.project.id}/curation/queues/duplicates"
    pair = next(
        p for p in c.viewer.get(queue).json()["items"] if {p["a"]["key"], p["b"]["key"]} == {"ada", "ada3"}
    )
    first = c.propose(c.editor, pair["proposal"]["changes"]).json()

    again = c.propose(c.owner, pair["proposal"]["changes"])
    reversed_by_key = c.propose(
        c.owner, [{"action": "merge_entities", "args": {"keep": "ada3", "merge": "ada"}}]
    )
    listed = c.viewer.get(queue).json()["items"]
    other_pair = c.propose(c.owner, MERGE)
    c.decide(c.owner, first["id"], approve=[], reject=[first["items"][0]["id"]])
    after_reject = c.viewer.get(queue).json()["items"]
    proposed_anew = c.propose(c.owner, pair["proposal"]["changes"])

    for refused in (again, reversed_by_key):
        assert refused.status_code == 409, refused.json()
        body = refused.json()
        assert body["code"] == "merge_pending" and body["changeSetId"] == first["id"]
        assert first["id"] in body["error"]
    pending = {frozenset((p["a"]["id"], p["b"]["id"])): p["pendingChangeSet"] for p in listed}
    assert pending[frozenset((str(c.e["ada"].id), str(twin.id)))] == first["id"]
    freed = {frozenset((p["a"]["id"], p["b"]["id"])): p["pendingChangeSet"] for p in after_reject}
    assert freed[frozenset((str(c.e["ada"].id), str(twin.id)))] is None
    assert other_pair.status_code == 201 and proposed_anew.status_code == 201

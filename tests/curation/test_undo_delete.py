"""Undoing a curation change set that deleted an entity (#51) brings it back under its own id and key,
with its relationships under theirs, so an old answer's citation of it and links to it open it
again; the write that does it (``restore_entity``) is an undo's only: no member, agent or MCP
client can call it or propose it with an id of their choosing."""

from __future__ import annotations

import pytest

from apps.graph_tools.models import GraphChange, GraphObject, GraphRelationship
from apps.graph_tools.registry import tool_list
from tests.curation.conftest import Curators

pytestmark = pytest.mark.django_db


def rel_ids(c: Curators, key: str) -> set[str]:
    entity = c.e[key]
    return {
        str(r.id)
        for r in GraphRelationship.objects.filter(project=c.project).filter(src=entity)
        | GraphRelationship.objects.filter(project=c.project, dst=entity)
    }


def delete_and_undo(c: Curators, key: str) -> tuple[dict, dict]:
    applied = c.propose(c.editor, [{"action": "delete_entity", "args": {"entity_id": key}}]).json()
    c.decide(c.owner, applied["id"])
    undo = c.editor.post(f"/api/change-sets/{applied['id']}/undo")
    assert undo.status_code == 201, undo.json()
    decided = c.decide(c.owner, undo.json()["id"])
    assert decided.status_code == 200, decided.json()
    return undo.json(), decided.json()


def test_undo_of_a_delete_restores_the_entity_under_its_id_and_key_with_its_relationships(curators: Curators):
    c = curators
    before = rel_ids(c, "ada2")

    undo, decided = delete_and_undo(c, "ada2")

    restored = GraphObject.objects.filter(id=c.e["ada2"].id).first()
    assert restored is not None, "restored under another id"
    assert decided["status"] == "applied"
    assert [i["action"] for i in undo["items"]] == ["restore_entity"]
    assert (restored.key, restored.name, restored.description) == (
        "ada2",
        "A. Lovelace",
        "Wrote the first program.",
    )
    assert restored.properties == {"aliases": ["Augusta Ada King"], "born": 1815}
    assert rel_ids(c, "ada2") == before and len(before) == 4
    cited = c.editor.get(f"/api/projects/{c.project.id}/graph/entities/{c.e['ada2'].id}")
    assert cited.status_code == 200 and cited.json()["mergedFrom"] is None
    restores = GraphChange.objects.filter(project=c.project, action="restore_entity")
    assert restores.filter(entity_id=c.e["ada2"].id).count() == 1 and restores.count() == 1 + 4


def test_a_relationship_whose_other_end_is_gone_is_left_out_and_the_summary_says_so(curators: Curators):
    c = curators
    applied = c.propose(c.editor, [{"action": "delete_entity", "args": {"entity_id": "ada2"}}]).json()
    c.decide(c.owner, applied["id"])
    c.decide(
        c.owner,
        c.propose(c.editor, [{"action": "delete_entity", "args": {"entity_id": "london"}}]).json()["id"],
    )

    undo = c.editor.post(f"/api/change-sets/{applied['id']}/undo").json()
    c.decide(c.owner, undo["id"])

    assert "1 cannot be restored" in undo["items"][0]["evidence"]["plan"]["summary"]
    assert GraphObject.objects.filter(id=c.e["ada2"].id).exists()
    assert len(rel_ids(c, "ada2")) == 3


def test_undo_of_the_undo_deletes_it_again(curators: Curators):
    c = curators
    undo, _ = delete_and_undo(c, "ada2")

    redo = c.editor.post(f"/api/change-sets/{undo['id']}/undo").json()
    c.decide(c.owner, redo["id"])

    assert [i["action"] for i in redo["items"]] == ["delete_entity"]
    assert not GraphObject.objects.filter(id=c.e["ada2"].id).exists()


def test_restore_entity_is_no_tool_and_cannot_be_proposed(curators: Curators):
    c = curators
    forged = {
        "id": "00000000-0000-4000-8000-000000000001",
        "key": "forged",
        "type": "Person",
        "name": "Forged",
    }

    refused = c.propose(c.editor, [{"action": "restore_entity", "args": forged}])

    assert refused.status_code == 400 and refused.json()["code"] == "unknown_action"
    assert "restore_entity" not in {t.name for t in tool_list()}
    assert not GraphObject.objects.filter(key="forged").exists()

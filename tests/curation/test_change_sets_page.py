"""The change sets tab of the queues page (#51): each item as the write it proposes, readable, and an
applied change set that has been undone (or whose undo waits) offers no second undo."""

from __future__ import annotations

import re

import pytest

from tests.curation.conftest import Curators

pytestmark = pytest.mark.django_db


def _rows(html: str) -> dict[str, str]:
    found = re.findall(r'<tr class="change-set" data-change-set-id="([^"]+)"[^>]*>(.*?)</tr>', html, re.S)
    return dict(found)


def test_the_change_sets_tab_shows_each_item_as_its_action_and_arguments_with_entity_names(
    curators: Curators,
) -> None:
    e = curators.e
    changes = [
        {"action": "merge_entities", "args": {"keep": str(e["ada"].id), "merge": str(e["ada2"].id)}},
        {"action": "update_entity", "args": {"entity_id": "babbage", "properties": {"born": 1791}}},
        {
            "action": "create_relationship",
            "args": {"src": "babbage", "type": "LIVES_IN", "dst": str(e["london"].id)},
        },
    ]
    proposed = curators.propose(curators.editor, changes, "Tidy up").json()

    html = curators.viewer.get(f"/projects/{curators.project.id}/graph/change-sets").content.decode()

    row = _rows(html)[proposed["id"]]
    assert "{&#x27;" not in row and "&quot;keep&quot;" not in row  # no Python or JSON dict
    assert str(e["ada2"].id) not in re.sub(r'href="[^"]*"', "", row)  # names, not bare ids
    assert "Merge entities" in row and "Update entity" in row and "Create relationship" in row
    assert re.search(r"<dt>keeps</dt>\s*<dd><a [^>]*>Ada Lovelace</a></dd>", row)
    assert re.search(r"<dt>merges in</dt>\s*<dd><a [^>]*>A. Lovelace</a></dd>", row)
    assert re.search(r"<dt>property born</dt>\s*<dd>1791</dd>", row)
    assert re.search(r"<dt>from</dt>\s*<dd><a [^>]*>Charles Babbage</a></dd>", row)
    assert re.search(r"<dt>to</dt>\s*<dd><a [^>]*>London</a></dd>", row)
    assert row.index("<dt>from</dt>") < row.index("<dt>type</dt>") < row.index("<dt>to</dt>")  # as declared


def test_an_undone_change_set_shows_its_undo_instead_of_an_undo_button(curators: Curators) -> None:
    e = curators.e
    merge = [{"action": "merge_entities", "args": {"keep": str(e["ada"].id), "merge": str(e["ada2"].id)}}]
    merged = curators.propose(curators.editor, merge, "Merge").json()["id"]
    curators.decide(curators.owner, merged)
    url = f"/projects/{curators.project.id}/graph/change-sets"
    before = _rows(curators.owner.get(url).content.decode())[merged]
    undo = curators.owner.post(f"/api/change-sets/{merged}/undo").json()["id"]

    waiting = _rows(curators.owner.get(url).content.decode())[merged]
    curators.decide(curators.editor, undo)
    undone = _rows(curators.owner.get(url).content.decode())[merged]

    assert f'data-url="/api/change-sets/{merged}/undo"' in before
    assert "/undo" not in waiting and "undo in review" in waiting and f'href="#change-set-{undo}"' in waiting
    assert "/undo" not in undone and re.search(rf'undone by <a href="#change-set-{undo}">', undone)


def test_an_undo_rejected_whole_leaves_the_undo_button(curators: Curators) -> None:
    e = curators.e
    merge = [{"action": "merge_entities", "args": {"keep": str(e["ada"].id), "merge": str(e["ada2"].id)}}]
    merged = curators.propose(curators.editor, merge, "Merge").json()["id"]
    curators.decide(curators.owner, merged)
    undo = curators.owner.post(f"/api/change-sets/{merged}/undo").json()
    curators.decide(curators.editor, undo["id"], approve=[], reject=[i["id"] for i in undo["items"]])

    html = curators.owner.get(f"/projects/{curators.project.id}/graph/change-sets").content.decode()

    assert f'data-url="/api/change-sets/{merged}/undo"' in _rows(html)[merged]


def test_a_viewer_is_shown_no_approve_reject_or_undo(curators: Curators) -> None:
    e = curators.e
    waiting = curators.propose(
        curators.editor, [{"action": "delete_entity", "args": {"entity_id": "engine"}}]
    ).json()
    merge = [{"action": "merge_entities", "args": {"keep": str(e["ada"].id), "merge": str(e["ada2"].id)}}]
    merged = curators.propose(curators.editor, merge, "Merge").json()["id"]
    curators.decide(curators.owner, merged)
    url = f"/projects/{curators.project.id}/graph/change-sets"

    seen = curators.viewer.get(url).content.decode()
    owner_sees = curators.owner.get(url).content.decode()

    assert waiting["id"] in seen and merged in seen
    assert "data-url=" not in seen
    assert f'data-url="/api/change-sets/{merged}/undo"' in owner_sees
    assert f'data-url="/api/change-sets/{waiting["id"]}/decision"' in owner_sees

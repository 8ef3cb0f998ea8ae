"""The page after a curation merge (#51): an old answer that used the merged entity carries a small
"stale" mark and says the merge changed the graph; an answer the graph did not move past has none."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from apps.curation.proposals import curation_propose
from apps.documents.review import change_set_decide
from apps.projects.selectors import Principal
from tests.chat.browser.helpers import World
from tests.chat.browser.test_graph_moved_on import answer_about_paris
from tests.factories import add_member, make_entity, make_user
from tests.llm_server import LLMTestServer

pytestmark = pytest.mark.browser


def test_an_answer_that_used_an_entity_merged_since_shows_a_stale_mark_after_reload(
    page: Page, live_server_url: str, world: World, llm_server: LLMTestServer
) -> None:
    answer_about_paris(page, live_server_url, llm_server)
    expect(page.locator(".stale-mark")).to_have_count(0)
    make_entity(world.project, "paris-city", type="City", name="City of Paris")
    reviewer = make_user()
    add_member(world.project, reviewer, "editor")
    proposed = curation_propose(
        principal=Principal(user=world.user),
        project_id=world.project.id,
        changes=[{"action": "merge_entities", "args": {"keep": "paris-city", "merge": "paris"}}],
    )
    change_set_decide(
        principal=Principal(user=reviewer), change_set_id=proposed.id, approve=None, reject=[], edits={}
    )

    page.reload()

    answer = page.locator("article.message-assistant").last
    expect(answer.locator(".stale-mark")).to_have_text("stale")
    expect(answer.locator(".graph-changed li").first).to_contain_text("merge entities")

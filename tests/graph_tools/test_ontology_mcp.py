"""A write that breaks the project's ontology is refused over MCP too (#51): the official ``mcp``
client against /mcp of the real ASGI app served by daphne (direct writes allowed, as an operator
may), with an editor's token."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from apps.graph_tools.models import GraphRelationship
from apps.graph_tools.ontology.formats import ontology_read
from apps.graph_tools.ontology.services import ontology_store
from tests.factories import add_member, make_token, make_user
from tests.graph_tools.conftest import SmallGraph, build_small_graph
from tests.graph_tools.test_mcp_server import http_client, payload
from tests.support.mcp_daphne import mcp_daphne

pytestmark = pytest.mark.django_db(transaction=True)

ONTOLOGY = b"""
entity_types: {Person: {}, Company: {}, City: {}}
relationship_types:
  WORKS_AT: {domain: [Person], range: [Company]}
  KNOWS: {domain: [Person], range: [Person]}
"""


@pytest.fixture(scope="module")
def writable_mcp_url(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with mcp_daphne(django_db_blocker, KGCHAT_DIRECT_WRITES="1") as url:
        yield url


@pytest.fixture
def editor_token(transactional_db: None) -> tuple[SmallGraph, str]:
    graph = build_small_graph(embed=False)
    editor = make_user()
    add_member(graph.project, editor, "editor")
    ontology_store(project_id=graph.project.id, ontology=ontology_read(ONTOLOGY, "yaml"), user_id=None)
    return graph, make_token(editor, graph.project)


async def test_a_domain_violation_is_refused_through_mcp_naming_the_rule(
    writable_mcp_url: str, editor_token: tuple[SmallGraph, str]
):
    graph, secret = editor_token

    async with http_client(writable_mcp_url, {"Authorization": f"Bearer {secret}"}) as client:
        refused = await client.call_tool(
            "create_relationship", {"src": "lisbon", "type": "WORKS_AT", "dst": "acme"}
        )
        allowed = await client.call_tool(
            "create_relationship", {"src": "dave", "type": "WORKS_AT", "dst": "acme"}
        )
        queue = await client.call_tool("ontology_violations", {"limit": 5})

    assert refused.is_error is True
    assert refused.structured_content["code"] == "ontology_violation"
    assert "domain: WORKS_AT from a City: its domain is Person" in refused.content[0].text
    assert not await sync_to_async(
        GraphRelationship.objects.filter(type="WORKS_AT", src=graph.e["lisbon"]).exists
    )()
    assert payload(allowed)["changed"] is True
    # The graph's LIVES_IN and LOCATED_IN are not declared: in the queue, each with its rule.
    rules = {(i["relationship"]["type"], i["violations"][0]["rule"]) for i in payload(queue)["items"]}
    assert rules == {("LIVES_IN", "relationship_type"), ("LOCATED_IN", "relationship_type")}

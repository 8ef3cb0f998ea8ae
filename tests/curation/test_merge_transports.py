"""merge_entities outside a change set (#51): an agent's call waits for a member's approval like every
write tool's, and an MCP client with direct writes allowed merges through the registry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from asgiref.sync import sync_to_async
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from apps.agents.llm.scripted import text, tool_call
from apps.agents.models import AgentDefinition
from apps.graph_tools.models import GraphChange, GraphObject, WriteApproval
from tests.chat.conftest import agent_request, fresh_bus, sse_turn, world  # noqa: F401
from tests.curation.conftest import Curators, build_curators
from tests.factories import make_entity, make_relationship, make_token
from tests.support.mcp_daphne import mcp_daphne

pytestmark = pytest.mark.django_db(transaction=True)


async def test_an_agents_merge_waits_for_approval_and_is_applied_once_approved(world, scripted):  # noqa: F811
    from apps.agents.definitions import default_agents_install

    await sync_to_async(default_agents_install)(project=world["project"])
    curator = await AgentDefinition.objects.aget(project=world["project"], name="graph-curator-agent")
    twin = await sync_to_async(make_entity)(world["project"], "paris-fr", type="City", name="Paris, France")
    await sync_to_async(make_relationship)(world["project"], twin, "CAPITAL_OF", world["france"])
    scripted.turns += [
        [
            text("They are the same city. ")[0],
            tool_call("merge_entities", {"keep": "paris", "merge": "paris-fr"}, id="m1"),
        ],
        text("Merged."),
    ]

    status, frames = await sse_turn(world["client"], agent_request(world, curator, "Merge the two Parises"))
    card = next(f for f in frames if f["type"] == "approval_required")
    waiting = await GraphObject.objects.filter(id=twin.id).aexists()
    decided = await world["client"].post(
        f"/api/approvals/{card['approvalId']}/decision",
        {"decision": "approve"},
        content_type="application/json",
    )

    assert status == 200 and card["tool"] == "merge_entities" and waiting
    assert "Merge entity" in card["diff"]["summary"] and "1 collapsed" in card["diff"]["summary"]
    assert decided.status_code == 200, decided.content
    approval = await WriteApproval.objects.aget(id=card["approvalId"])
    assert approval.status == "approved" and approval.result["changed"] is True
    assert not await GraphObject.objects.filter(id=twin.id).aexists()
    paris = await GraphObject.objects.aget(id=world["paris"].id)
    assert paris.properties["aliases"] == ["Paris, France"]
    change = await GraphChange.objects.aget(entity_id=twin.id)
    assert (change.action, change.authority, str(change.approval_id)) == (
        "merge_entities",
        "approval",
        card["approvalId"],
    )


@pytest.fixture(scope="module")
def direct_writes_mcp(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with mcp_daphne(django_db_blocker, KGCHAT_DIRECT_WRITES="1") as url:
        yield url


async def test_an_editor_merges_through_mcp_where_direct_writes_are_allowed(direct_writes_mcp: str):
    c: Curators = await sync_to_async(build_curators)()
    editor = await sync_to_async(lambda: c.project.memberships.get(role="editor").user)()
    secret = await sync_to_async(make_token)(editor, c.project)
    client = Client(
        streamable_http_client(
            direct_writes_mcp,
            http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=60),
        )
    )

    async with client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("merge_entities", {"keep": "ada", "merge": "ada2"})

    assert listed["merge_entities"].annotations.destructive_hint is True
    assert set(listed["merge_entities"].input_schema["properties"]) == {"keep", "merge"}
    assert result.is_error is False, result.content
    assert json.loads(result.content[0].text)["changed"] is True
    assert not await GraphObject.objects.filter(id=c.e["ada2"].id).aexists()
    change = await GraphChange.objects.filter(entity_id=c.e["ada2"].id).afirst()
    assert change is not None and (change.action, change.authority) == ("merge_entities", "direct")

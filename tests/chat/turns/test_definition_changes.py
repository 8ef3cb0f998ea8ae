"""What a turn reads of its agent definition and its project's graph is read for that turn: a
definition edited in the admin, disabled there, or a project whose types changed, is what the
very next turn gets, in a follow-up and in a new conversation. (The turn path keeps its compiled
SQL between turns, apps/core/prepared.py, and the project's types per graph version: neither may
keep what they read.)"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from apps.agents.llm.scripted import text
from apps.graph_tools.versions import graph_version_bump
from tests.chat.conftest import adb, agent_request, sse_turn, tokens
from tests.factories import make_entity, make_relationship, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def _admin_edit(definition, **fields) -> int:
    """Save ``definition`` through the admin's change form with ``fields`` changed; the status."""
    admin = make_user()
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client = Client()
    client.force_login(admin)
    model = definition.model or {}
    form = {
        "project": definition.project_id,
        "name": definition.name,
        "description": definition.description,
        "system_prompt": definition.system_prompt,
        "tools": list(definition.tools),
        "model_name": model.get("name", ""),
        "temperature": str(model.get("temperature", 0.1)),
        "flow_type": definition.flow_type,
        "max_steps": str(definition.max_steps),
        "visibility": definition.visibility,
        "sub_agents": ",".join(definition.sub_agents or []),
        "mcp_servers": json.dumps(definition.mcp_servers or []),
        "history_limit": str(definition.history_limit),
        "token_budget": str(definition.token_budget),
        "tool_policy": json.dumps(definition.tool_policy or {}),
        "disabled_reason": definition.disabled_reason or "",
        **fields,
    }
    response = client.post(f"/admin/agents/agentdefinition/{definition.id}/change/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    return response.status_code


def _system(call) -> str:
    return next((m.content for m in call.messages if m.role == "system"), "")


async def test_a_definition_edited_in_the_admin_is_what_the_next_turn_and_the_next_conversation_get(
    world, agent, scripted
):
    scripted.turns += [text("one"), text("two"), text("three")]
    _, first = await sse_turn(world["client"], agent_request(world, agent))
    conversation = first[0]["conversationId"]

    await adb(_admin_edit)(agent, system_prompt="Answer in French.", tools=["get_entity_edges"])
    _, follow_up = await sse_turn(world["client"], {"message": "And Lyon?", "conversationId": conversation})
    _, new = await sse_turn(world["client"], agent_request(world, agent, "Where is Lyon?"))

    before, after_follow_up, after_new = scripted.calls
    assert "Answer in French." not in _system(before) and len(before.tools) > 1
    for call in (after_follow_up, after_new):
        assert "Answer in French." in _system(call)
        assert [t.name for t in call.tools] == ["get_entity_edges"]
    assert (tokens(follow_up), tokens(new)) == ("two", "three")


async def test_a_definition_disabled_in_the_admin_refuses_the_next_turn(world, agent, scripted):
    scripted.turns += [text("one")]
    _, first = await sse_turn(world["client"], agent_request(world, agent))
    conversation = first[0]["conversationId"]

    await adb(_admin_edit)(agent, disabled_reason="maintenance")
    status_follow_up, follow_up = await sse_turn(
        world["client"], {"message": "And Lyon?", "conversationId": conversation}
    )
    status_new, new = await sse_turn(world["client"], agent_request(world, agent, "Where is Lyon?"))

    assert (status_follow_up, follow_up["code"]) == (409, "agent_definition_disabled")
    assert (status_new, new["code"]) == (409, "agent_definition_disabled")
    assert "maintenance" in new["error"]


async def test_a_type_added_to_the_project_is_offered_to_the_next_turn(world, agent, scripted):
    await adb(_admin_edit)(agent, tools=["query_paths"])
    scripted.turns += [text("one"), text("two")]
    _, first = await sse_turn(world["client"], agent_request(world, agent))
    conversation = first[0]["conversationId"]

    def add_a_type() -> None:
        project = world["project"]
        river = make_entity(project, "seine", type="River", name="Seine")
        make_relationship(project, river, "FLOWS_THROUGH", world["paris"])
        graph_version_bump(project_id=project.id)  # as every write and import does

    await adb(add_a_type)()
    await sse_turn(world["client"], {"message": "And the Seine?", "conversationId": conversation})

    def types_offered(call) -> tuple[list[str], list[str]]:
        hop = call.tools[0].parameters["$defs"]["Hop"]["properties"]
        enum = [
            next(b for b in hop[k]["anyOf"] if b.get("type") == "string")["enum"]
            for k in ("type", "relationship")
        ]
        return enum[0], enum[1]

    before, after = (types_offered(call) for call in scripted.calls)
    assert "River" not in before[0] and "FLOWS_THROUGH" not in before[1]
    assert "River" in after[0] and "FLOWS_THROUGH" in after[1]

"""A write that breaks the project's ontology, proposed by an agent in a chat turn (#51): refused
when it is proposed (no approval card; the model is told the rule), and refused when a member
approves a proposal the ontology came to forbid after it was made (nothing written)."""

from __future__ import annotations

import pytest

from apps.agents.llm.scripted import text, tool_call
from apps.agents.models import AgentDefinition
from apps.graph_tools.models import GraphRelationship, WriteApproval
from apps.graph_tools.ontology.formats import ontology_read
from apps.graph_tools.ontology.services import ontology_store
from tests.chat.conftest import adb, agent_request, sse_turn, types
from tests.chat.turns.test_approval_turns import decide, tool_results_seen_by_model

pytestmark = pytest.mark.django_db(transaction=True)

ONTOLOGY = b"""
entity_types: {City: {}, Country: {}}
relationship_types:
  CAPITAL_OF: {domain: [City], range: [Country]}
"""
# France is a Country: CAPITAL_OF from it breaks the domain (and the range: Paris is a City).
BACKWARDS = {"src": "france", "type": "CAPITAL_OF", "dst": "paris"}


@pytest.fixture
def curator(world):
    from apps.agents.definitions import default_agents_install

    default_agents_install(project=world["project"])
    return AgentDefinition.objects.get(project=world["project"], name="graph-curator-agent")


async def import_ontology(world) -> None:
    await adb(ontology_store)(
        project_id=world["project"].id, ontology=ontology_read(ONTOLOGY, "yaml"), user_id=None
    )


async def test_a_domain_violation_an_agent_proposes_is_refused_before_any_approval(world, curator, scripted):
    await import_ontology(world)
    scripted.turns += [
        [tool_call("create_relationship", BACKWARDS, id="call-o")],
        text("France cannot be the capital of Paris."),
    ]

    status, frames = await sse_turn(world["client"], agent_request(world, curator, "Link France and Paris"))

    assert status == 200
    assert "approval_required" not in types(frames)
    assert not await WriteApproval.objects.aexists()
    told = tool_results_seen_by_model(scripted.calls[-1])[-1]
    assert "ontology_violation" in told and "its domain is City" in told
    assert not await GraphRelationship.objects.filter(src=world["france"]).aexists()


async def test_approving_a_proposal_the_ontology_now_forbids_writes_nothing_and_tells_the_model(
    world, curator, scripted
):
    scripted.turns += [
        [tool_call("create_relationship", BACKWARDS, id="call-o")],
        text("I could not link them."),
    ]
    status, frames = await sse_turn(world["client"], agent_request(world, curator, "Link France and Paris"))
    card = next(f for f in frames if f["type"] == "approval_required")
    await import_ontology(world)

    status, body = await decide(world["client"], card["approvalId"], "approve")

    assert status == 200 and body["approval"]["status"] == "approved"
    approval = await WriteApproval.objects.aget(id=card["approvalId"])
    assert approval.result["code"] == "ontology_violation"
    assert "domain" in approval.result["error"]
    assert not await GraphRelationship.objects.filter(src=world["france"]).aexists()
    assert "ontology_violation" in tool_results_seen_by_model(scripted.calls[-1])[-1]

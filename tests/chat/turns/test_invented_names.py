"""An agent's answer names only entities of the graph that its turn's tools returned (issue #47):
a name of the graph no tool returned is neither streamed nor stored, for the offline default's
small-model loop and for a model with native tool calls."""

import json
from collections.abc import Iterator

import pytest

from apps.agents.definitions import default_agents_install
from apps.agents.llm.scripted import text, tool_call
from apps.agents.models import AgentDefinition
from apps.chat.models import Message
from apps.chat.turns.grounding import LEFT_OUT
from apps.graph_tools.selectors import entities_named
from tests.chat.conftest import agent_request, sse_turn, tokens
from tests.factories import make_entity, make_project
from tests.llm_server import Json, LLMTestServer, Stream, completion, text_chunks

db = pytest.mark.django_db(transaction=True)


@pytest.fixture
def elsewhere(world):
    """Entities of the world's graph that no question about Paris finds."""
    berlin = make_entity(world["project"], "berlin", type="City", name="Berlin", description="A city")
    germany = make_entity(world["project"], "germany", type="Country", name="Germany", description="A land")
    return {"berlin": berlin, "germany": germany}


@pytest.fixture
def small_model(settings) -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        settings.KGCHAT_MODEL = "local/qwen2.5-1.5b"
        settings.KGCHAT_LOCAL_LLM_URL = server.base_url
        settings.KGCHAT_SMALL_MODEL_PLANS = True
        yield server


@pytest.fixture
def planning_agent(world):
    default_agents_install(project=world["project"])
    agent = AgentDefinition.objects.get(project=world["project"], name="graph-query-agent")
    assert "query_paths" in agent.tools
    return agent


async def _answer(frames: list[dict]) -> Message:
    return await Message.objects.aget(id=frames[-1]["messageId"])


@db
async def test_the_offline_default_loop_does_not_stream_or_store_a_name_of_the_graph_no_tool_returned(
    world, elsewhere, planning_agent, small_model
):
    plan = {"start": "Paris", "asks_for": "Country", "relationships": ["CAPITAL_OF"], "and": None}
    small_model.enqueue(  # one shape fits the question (a list): no shape is asked
        Json(completion(json.dumps(plan))),
        Stream(text_chunks("Paris is the capital of France, as Ber", "lin is of Germ", "any.")),
    )
    question = "Paris is the capital of which country?"

    _, frames = await sse_turn(world["client"], agent_request(world, planning_agent, question))

    stored = await _answer(frames)
    assert tokens(frames) == stored.content
    assert "Berlin" not in stored.content and "Germany" not in stored.content
    assert stored.content.endswith(f"as {LEFT_OUT} is of {LEFT_OUT}.")
    assert f"[France](entity:{world['france'].id})" in stored.content


@db
async def test_a_native_tools_model_does_not_stream_or_store_a_name_of_the_graph_no_tool_returned(
    world, elsewhere, agent, scripted
):
    scripted.turns += [
        [tool_call("get_entity_edges", {"entity_id": "paris"}, id="call-1")],
        text("Paris is the capital of France, and Ber", "lin that of Germany; Atlantis of nothing."),
    ]

    _, frames = await sse_turn(world["client"], agent_request(world, agent, "Where is Paris?"))

    stored = await _answer(frames)
    assert tokens(frames) == stored.content
    assert stored.content == (
        f"Paris is the capital of France, and {LEFT_OUT} that of {LEFT_OUT}; Atlantis of nothing."
    )


@db
async def test_a_name_an_earlier_turn_of_the_conversation_returned_is_grounded(
    world, elsewhere, agent, scripted
):
    scripted.turns += [
        [tool_call("get_entity_edges", {"entity_id": "berlin"}, id="call-1")],
        text("Berlin has no relationships."),
        text("As I said, Berlin."),
    ]
    _, first = await sse_turn(world["client"], agent_request(world, agent, "Tell me about that city"))

    _, frames = await sse_turn(
        world["client"], {"message": "Which one again?", "conversationId": first[0]["conversationId"]}
    )

    assert (await _answer(first)).content == "Berlin has no relationships."
    assert (await _answer(frames)).content == "As I said, Berlin."


@db
def test_entities_are_found_by_name_or_alias_case_aside_in_their_own_project_only(world):
    project = world["project"]
    known = make_entity(
        project, "de", type="Country", name="Germany", properties={"aliases": ["Deutschland"]}
    )
    make_entity(make_project(name="Other"), "fr2", type="Country", name="Spain")

    found = entities_named(
        project_id=project.id, names=["GERMANY", "deutschland", "Spain", "Paris", "Nowhere"]
    )

    assert found == {
        "germany": {str(known.id)},
        "deutschland": {str(known.id)},
        "paris": {str(world["paris"].id)},
    }

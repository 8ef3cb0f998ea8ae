"""A whole agent turn through the offline default's small-model loop, over a real HTTP model server.

``local/qwen2.5-1.5b`` is pointed at the scripted OpenAI-compatible test server: the first step
must be forced by the step schema, the answer is streamed, and a made-up entity id in it never
reaches a token frame or the stored answer.
"""

import json
from collections.abc import Iterator

import pytest

from apps.agents.definitions import default_agents_install
from apps.agents.models import AgentDefinition, AgentRun, AgentRunToolCall
from apps.chat.models import Message
from tests.chat.conftest import sse_turn, tokens
from tests.llm_server import Json, LLMTestServer, Stream, completion, constrained_schema, text_chunks

db = pytest.mark.django_db(transaction=True)
MADE_UP = "123e4567-e89b-12d3-a456-426614174000"


@pytest.fixture
def small_model(settings) -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        settings.KGCHAT_MODEL = "local/qwen2.5-1.5b"
        settings.KGCHAT_LOCAL_LLM_URL = server.base_url
        yield server


@pytest.fixture
def agent(world):
    default_agents_install(project=world["project"])
    return AgentDefinition.objects.get(project=world["project"], name="graph-query-agent")


@pytest.fixture
def agent_with_paths(agent, settings):
    """The default agent offering query_paths, with the small-model loop's planning on."""
    settings.KGCHAT_SMALL_MODEL_PLANS = True
    if "query_paths" not in agent.tools:
        agent.tools = [*agent.tools, "query_paths"]
        agent.save(update_fields=["tools"])
    return agent


@pytest.fixture
def agent_without_paths(agent):
    agent.tools = [t for t in agent.tools if t != "query_paths"]
    agent.save(update_fields=["tools"])
    return agent


@db
async def test_small_model_turn_is_forced_to_a_tool_then_answers_citing_only_what_the_tool_returned(
    world, agent, small_model, settings
):
    # The default agent offers query_paths; with planning off (KGCHAT_SMALL_MODEL_PLANS=0) the small
    # model never sees it and takes the earlier recipe.
    settings.KGCHAT_SMALL_MODEL_PLANS = False
    assert "query_paths" in agent.tools
    small_model.enqueue(
        Json(completion('{"name": "search_entities", "arguments": {"query": "Paris"}}')),
        Stream(text_chunks("[Paris](entity:paris) is the capital", f" of [entity:{MADE_UP}] France.")),
    )
    body = {
        "message": "Where is Paris?",
        "projectId": str(world["project"].id),
        "agentDefinitionId": str(agent.id),
    }

    _, frames = await sse_turn(world["client"], body)

    stored = await Message.objects.filter(
        conversation_id=frames[0]["conversationId"], role="assistant"
    ).alast()
    assert stored is not None
    assert stored.content == f"[Paris](entity:{world['paris'].id}) is the capital of  France."
    assert tokens(frames) == stored.content
    assert frames[0]["model"] == "local/qwen2.5-1.5b"
    forced, answer = small_model.requests
    # The offline default's server (llama.cpp) gets the step's schema as an llguidance grammar.
    assert "response_format" not in forced and forced["grammar"].startswith("%llguidance {}")
    assert "oneOf" in (constrained_schema(forced) or {})
    assert "query_paths" not in json.dumps(forced)
    assert "response_format" not in answer and answer["stream"] is True
    # The search found Paris by name: the loop looked up its relationships, then France's, itself
    # (no model step), and the answer step read them as facts.
    shown = answer["messages"][-1]["content"]
    assert "Result of search_entities: [Paris](entity:paris)" in shown
    assert "- Paris capital of: [France](entity:france)" in shown
    tool_frames = [(f["tool"], f["status"]) for f in frames if f["type"] == "mcp_tool"]
    assert tool_frames == [
        ("search_entities", "started"),
        ("search_entities", "completed"),
        ("get_entity_edges", "started"),
        ("get_entity_edges", "completed"),
        ("get_entity_edges", "started"),
        ("get_entity_edges", "completed"),
    ]
    run = await AgentRun.objects.filter(conversation_id=frames[0]["conversationId"]).alast()
    assert run is not None
    recorded = [
        (c.tool_name, c.input.get("entity_id"))
        async for c in AgentRunToolCall.objects.filter(run=run).order_by("created_at")
    ]
    assert recorded == [
        ("search_entities", None),
        ("get_entity_edges", "paris"),
        ("get_entity_edges", "france"),
    ]


@db
async def test_small_model_loop_reads_a_search_of_a_graph_still_being_embedded_and_shows_its_cards(
    world, agent_without_paths, small_model
):
    agent = agent_without_paths
    small_model.enqueue(
        Json(completion('{"name": "hybrid_search", "arguments": {"query": "Paris"}}')),
        Stream(text_chunks("[Paris](entity:paris) is the capital of [France](entity:france).")),
    )
    body = {
        "message": "Where is Paris?",
        "projectId": str(world["project"].id),
        "agentDefinitionId": str(agent.id),
    }

    _, frames = await sse_turn(world["client"], body)

    search = next(f for f in frames if f["type"] == "mcp_tool" and f["status"] == "completed")
    assert search["tool"] == "hybrid_search"
    assert search["result"]["embedding"] == {"pending": 2}
    assert [r["key"] for r in search["result"]["results"]] == ["paris"]
    shown = small_model.requests[-1]["messages"][-1]["content"]
    assert "Result of hybrid_search: [Paris](entity:paris)" in shown
    assert "- Paris capital of: [France](entity:france)" in shown


@db
async def test_small_model_reads_that_an_empty_search_may_have_missed_entities_still_being_embedded(
    world, agent_without_paths, small_model
):
    agent = agent_without_paths
    small_model.enqueue(
        Json(completion('{"name": "hybrid_search", "arguments": {"query": "Atlantis"}}')),
        Stream(text_chunks("I could not find it in the knowledge graph.")),
    )
    body = {
        "message": "Where is Atlantis?",
        "projectId": str(world["project"].id),
        "agentDefinitionId": str(agent.id),
    }

    await sse_turn(world["client"], body)

    shown = small_model.requests[-1]["messages"][-1]["content"]
    assert (
        "Result of hybrid_search:\n(no results)\n"
        "(2 entities of the graph are still being indexed: this search may have missed them.)"
    ) in shown


@db
async def test_small_model_turn_plans_one_path_query_and_answers_from_its_result_citing_only_what_it_returned(
    world, agent_with_paths, small_model
):
    plan = {"start": "Paris", "asks_for": "Country", "relationships": ["CAPITAL_OF"], "and": None}
    # One shape fits the question (a list): the model is asked the plan, not the shape.
    small_model.enqueue(
        Json(completion(json.dumps(plan))),
        Stream(text_chunks("Paris is the capital", f" of France [x](entity:{MADE_UP}).")),
    )
    body = {
        "message": "Paris is the capital of which country?",
        "projectId": str(world["project"].id),
        "agentDefinitionId": str(agent_with_paths.id),
    }

    _, frames = await sse_turn(world["client"], body)

    forced, answer = small_model.requests
    assert "asks_for" in ((constrained_schema(forced) or {}).get("properties") or {})
    assert "Entities named: Paris: City" in forced["messages"][-1]["content"]
    assert "Paris -CAPITAL_OF-> Country: France." in answer["messages"][-1]["content"]
    stored = await Message.objects.filter(
        conversation_id=frames[0]["conversationId"], role="assistant"
    ).alast()
    assert stored is not None
    # The answer writes a link itself, so the loop links no more names from there on; the made-up
    # one is dropped by the citation filter.
    assert stored.content == f"[Paris](entity:{world['paris'].id}) is the capital of France x."
    run = await AgentRun.objects.filter(conversation_id=frames[0]["conversationId"]).alast()
    recorded = [c.input async for c in AgentRunToolCall.objects.filter(run=run).order_by("created_at")]
    assert recorded[0] == {"start": [{"mentioned_in": "Paris is the capital of which country?"}], "limit": 50}
    assert recorded[1]["hops"] == [{"relationship": "CAPITAL_OF", "direction": "out", "type": "Country"}]
    assert len(recorded) == 2


def _offered_tools(request: dict) -> set[str]:
    """The tools a forced step's schema lets the model call."""
    return {branch["properties"]["name"]["const"] for branch in (constrained_schema(request) or {})["oneOf"]}


@db
async def test_small_model_is_not_shown_search_passages_in_a_project_without_documents(
    world, agent, small_model, settings
):
    settings.KGCHAT_SMALL_MODEL_PLANS = False  # the recipe's forced step lists the tools it is shown
    assert "search_passages" in agent.tools
    small_model.enqueue(
        Json(completion('{"name": "search_entities", "arguments": {"query": "Paris"}}')),
        Stream(text_chunks("[Paris](entity:paris) is in [France](entity:france).")),
    )

    await sse_turn(
        world["client"],
        {
            "message": "Where is Paris?",
            "projectId": str(world["project"].id),
            "agentDefinitionId": str(agent.id),
        },
    )

    forced = small_model.requests[0]
    assert "search_passages" not in json.dumps(forced)
    assert {"search_entities", "hybrid_search"} <= _offered_tools(forced)


@db
async def test_small_model_is_shown_search_passages_in_a_project_with_documents(
    world, agent, small_model, settings
):
    settings.KGCHAT_SMALL_MODEL_PLANS = False  # the recipe's forced step lists the tools it is shown
    from asgiref.sync import sync_to_async

    from apps.documents.services import document_upload

    await sync_to_async(document_upload)(
        project=world["project"], name="paris.md", data=b"# Paris\n\nParis is the capital of France."
    )
    small_model.enqueue(
        Json(completion('{"name": "search_passages", "arguments": {"query": "Paris"}}')),
        Stream(text_chunks("Paris is the capital of France.")),
    )

    _, frames = await sse_turn(
        world["client"],
        {
            "message": "Where is Paris?",
            "projectId": str(world["project"].id),
            "agentDefinitionId": str(agent.id),
        },
    )

    forced = small_model.requests[0]
    assert "search_passages" in _offered_tools(forced)
    assert "- search_passages(query, document_id?, limit?)" in forced["messages"][0]["content"]
    tool_frames = [(f["tool"], f["status"]) for f in frames if f["type"] == "mcp_tool"]
    assert tool_frames[:2] == [("search_passages", "started"), ("search_passages", "completed")]

"""A whole agent turn through the offline default's small-model loop, over a real HTTP model server.

``local/qwen2.5-1.5b`` is pointed at the scripted OpenAI-compatible test server: the first step
must be forced by the step schema, the answer is streamed, and a made-up entity id in it never
reaches a token frame or the stored answer.
"""

from collections.abc import Iterator

import pytest

from apps.agents.definitions import default_agents_install
from apps.agents.models import AgentDefinition, AgentRun, AgentRunToolCall
from apps.chat.models import Message
from tests.chat.conftest import sse_turn, tokens
from tests.llm_server import Json, LLMTestServer, Stream, completion, text_chunks

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


@db
async def test_small_model_turn_is_forced_to_a_tool_then_answers_citing_only_what_the_tool_returned(
    world, agent, small_model
):
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
    assert forced["response_format"]["type"] == "json_schema"
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

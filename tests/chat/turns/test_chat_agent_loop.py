"""The agent loop as a use case (chat-agent-loop requirements, mapped onto kgchat per specs/README)."""

import pytest

from apps.agents.definitions import default_agents_install
from apps.agents.history import HistoryMessage, HistoryToolCall
from apps.agents.llm.scripted import text, tool_call
from apps.agents.models import AgentDefinition
from apps.agents.plain import history_messages
from apps.chat.models import Message
from apps.chat.turns.context import load_prompt
from apps.chat.turns.retrieval import NO_RESULTS, AlwaysRetrieveStrategy, format_entities
from apps.graph_tools.registry import tool_get
from tests.chat.conftest import sse_turn

db = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agent(world):
    default_agents_install(project=world["project"])
    return AgentDefinition.objects.get(project=world["project"], name="graph-query-agent")


def start(world, agent, message="Where is Paris?"):
    return {"message": message, "projectId": str(world["project"].id), "agentDefinitionId": str(agent.id)}


async def rows_of(frames):
    conversation_id = frames[0]["conversationId"]
    return [m async for m in Message.objects.filter(conversation_id=conversation_id).order_by("created_at")]


# CA-1 / CA-2 -----------------------------------------------------------------------------------


@db
async def test_single_turn_response_without_retrieval(world, agent, scripted):
    scripted.turns.append(text("Hello there."))

    _, frames = await sse_turn(world["client"], start(world, agent, "hello"))

    assert [(m.role, m.content) for m in await rows_of(frames)] == [
        ("user", "hello"),
        ("assistant", "Hello there."),
    ]


@db
async def test_direct_text_response_no_tool_use_exits_the_loop_at_once(world, agent, scripted):
    scripted.turns.append(text("Direct."))

    await sse_turn(world["client"], start(world, agent))

    assert len(scripted.calls) == 1


@db
async def test_response_with_tool_use_retrieval(world, agent, scripted):
    scripted.turns += [[tool_call("hybrid_search", {"query": "Paris"}, id="r1")], text("Paris is in France.")]

    _, frames = await sse_turn(world["client"], start(world, agent))

    second = scripted.calls[1].messages
    assert second[-1].role == "tool" and second[-1].tool_call_id == "r1"
    assert str(world["paris"].id) in second[-1].content
    assert (await rows_of(frames))[-1].content == "Paris is in France."


@db
async def test_single_tool_invocation_then_text(world, agent, scripted):
    scripted.turns += [[tool_call("search_entities", {"query": "Paris"}, id="a")], text("Done.")]

    _, frames = await sse_turn(world["client"], start(world, agent))

    assert len(scripted.calls) == 2
    assert [f["status"] for f in frames if f["type"] == "mcp_tool"] == ["started", "completed"]


@db
async def test_multiple_tool_invocations(world, agent, scripted):
    scripted.turns += [
        [tool_call("search_entities", {"query": "Paris"}, id="a")],
        [tool_call("get_entity_edges", {"entity_id": "paris"}, id="b")],
        [tool_call("traverse_graph", {"start_entity_id": "paris", "max_depth": 1}, id="c")],
        text("Paris is the capital of France."),
    ]

    _, frames = await sse_turn(world["client"], start(world, agent))

    completed = [f["callId"] for f in frames if f["type"] == "mcp_tool" and f["status"] == "completed"]
    assert completed == ["a", "b", "c"]
    assert len(scripted.calls) == 4
    assert [m.role for m in await rows_of(frames)] == ["user", *["assistant", "tool"] * 3, "assistant"]


# CA-3 / CA-4 -----------------------------------------------------------------------------------


def test_hybrid_search_tool_declares_a_strict_json_schema_with_a_required_query():
    tool = tool_get("hybrid_search")

    schema = tool.input_schema()

    assert "search" in tool.description.lower()
    assert schema["required"] == ["query"]
    assert schema["properties"]["limit"]["default"] == 10
    assert schema["additionalProperties"] is False


@db
async def test_tool_execution_returns_formatted_results(world):
    retrieval = await AlwaysRetrieveStrategy().retrieve(project_id=world["project"].id, query="Paris capital")

    assert retrieval.entities[0]["key"] == "paris"
    assert f"- [Paris](entity:{world['paris'].id}) (City), key paris" in retrieval.context
    assert "Capital city of France" in retrieval.context


def test_tool_execution_with_no_results():
    assert format_entities([]) == NO_RESULTS == "No matching entities were found in the knowledge graph."


# CA-5 / CA-6 -----------------------------------------------------------------------------------


def history(n: int) -> list[HistoryMessage]:
    return [HistoryMessage(role="user" if i % 2 == 0 else "assistant", content=f"m{i}") for i in range(n)]


def test_context_building_with_history():
    context = history_messages(history(3), "SYSTEM", max_messages=20)

    assert [(m.role, m.content) for m in context] == [
        ("system", "SYSTEM"),
        ("user", "m0"),
        ("assistant", "m1"),
        ("user", "m2"),
    ]


def test_full_history_within_limit():
    context = history_messages(history(5), "S", max_messages=20)

    assert [m.content for m in context[1:]] == ["m0", "m1", "m2", "m3", "m4"]


def test_history_exceeds_limit():
    context = history_messages(history(30), "S", max_messages=20)

    assert [m.content for m in context[1:]] == [f"m{i}" for i in range(10, 30)]


def test_tool_result_messages_preserved():
    call = HistoryToolCall(id="c1", name="hybrid_search", input={"query": "x"}, output={"results": []})
    messages = [
        HistoryMessage(role="user", content="q"),
        HistoryMessage(role="assistant", content="", tool_calls=[call]),
        HistoryMessage(role="tool", content='{"results": []}', tool_calls=[call]),
        HistoryMessage(role="assistant", content="nothing found"),
    ]

    context = history_messages(messages, "S", max_messages=20)

    assert [m.role for m in context] == ["system", "user", "assistant", "tool", "assistant"]
    assert context[3].tool_call_id == "c1" and context[3].content == '{"results": []}'


# CA-7 ------------------------------------------------------------------------------------------


@db
async def test_system_prompt_loaded_from_template(world, scripted):
    scripted.turns.append(text("ok"))

    await sse_turn(world["client"], {"message": "Paris", "projectId": str(world["project"].id)})

    template_start = load_prompt().split("{project_name}")[0]
    assert scripted.calls[0].messages[0].content.startswith(template_start)
    assert 'project "World"' in scripted.calls[0].messages[0].content


# CA-8 ------------------------------------------------------------------------------------------


@db
async def test_tool_result_persisted_in_conversation(world, agent, scripted):
    scripted.turns += [[tool_call("get_entity_edges", {"entity_id": "paris"}, id="p1")], text("ok")]

    _, frames = await sse_turn(world["client"], start(world, agent))

    tool_rows = [m for m in await rows_of(frames) if m.role == "tool"]
    assert len(tool_rows) == 1
    assert tool_rows[0].tool_calls[0]["id"] == "p1"
    assert tool_rows[0].tool_calls[0]["output"]["entity"]["key"] == "paris"
    assert "france" in tool_rows[0].content

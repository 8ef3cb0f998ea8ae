"""Passages of documents in the offline default's answers (issue 26 item 2), through the small-model
loop: ``local/qwen2.5-1.5b`` pointed at the scripted OpenAI-compatible test server, a project with
one uploaded Markdown document, whole SSE turns through the default agent.

The model reads each passage as a citable link ``[document](passage:<id>)`` with its text, the
answer's passage links survive only for passages a tool returned, and when the graph does not
answer the question the loop reads the passages itself, hop by hop (``agents/loop/reading``). A project without documents sends the
model exactly the requests it did before passages existed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from apps.agents.definitions import default_agents_install
from apps.agents.models import AgentDefinition, AgentRun, AgentRunToolCall
from apps.chat.models import Message
from apps.documents.models import Passage
from apps.documents.services import document_upload
from tests.chat.conftest import sse_turn, tokens
from tests.factories import make_entity, make_relationship
from tests.llm_server import (
    Json,
    LLMTestServer,
    Plan,
    Stream,
    completion,
    constrained_schema,
    last_user_text,
    text_chunks,
)

db = pytest.mark.django_db(transaction=True)
GUIDE = (
    "# Paris guide\n\n"
    "The Eiffel Tower in Paris was finished in 1889 for the World's Fair.\n\n"
    "The Louvre is the most visited museum in France.\n\n"
    "The Prado in Madrid is the most visited museum in Spain.\n"
)
MADE_UP = "99999999-9999-9999-9999-999999999999"


@pytest.fixture
def small_model(settings) -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        settings.KGCHAT_MODEL = "local/qwen2.5-1.5b"
        settings.KGCHAT_LOCAL_LLM_URL = server.base_url
        yield server


@pytest.fixture
def agent(world, settings):
    """The default agent on the earlier recipe (KGCHAT_SMALL_MODEL_PLANS=0); ``planning`` turns plans on."""
    settings.KGCHAT_SMALL_MODEL_PLANS = False
    default_agents_install(project=world["project"])
    return AgentDefinition.objects.get(project=world["project"], name="graph-query-agent")


@pytest.fixture
def guide(world) -> dict[str, Passage]:
    """paris-guide.md uploaded to the world project: its passages by their first words."""
    document_upload(project=world["project"], name="paris-guide.md", data=GUIDE.encode())
    passages = Passage.objects.filter(project=world["project"])
    return {
        "tower": passages.get(text__startswith="The Eiffel Tower"),
        "louvre": passages.get(text__startswith="The Louvre"),
        "prado": passages.get(text__startswith="The Prado"),
    }


@pytest.fixture
def museum(world):
    """A second relationship type and country, so that a plan can ask for museums and find none in Spain."""
    louvre = make_entity(world["project"], "louvre", type="Museum", name="Louvre")
    make_relationship(world["project"], louvre, "LOCATED_IN", world["france"])
    return make_entity(world["project"], "spain", type="Country", name="Spain")


def planning(agent: AgentDefinition, settings: Any) -> AgentDefinition:
    settings.KGCHAT_SMALL_MODEL_PLANS = True
    if "query_paths" not in agent.tools:
        agent.tools = [*agent.tools, "query_paths"]
        agent.save(update_fields=["tools"])
    return agent


def body(world: dict[str, Any], agent: AgentDefinition, message: str) -> dict[str, Any]:
    return {"message": message, "projectId": str(world["project"].id), "agentDefinitionId": str(agent.id)}


async def stored_answer(frames: list[dict[str, Any]]) -> Message:
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert tokens(frames) == answer.content
    return answer


async def recorded_calls(frames: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    run = await AgentRun.objects.filter(conversation_id=frames[0]["conversationId"]).alast()
    return [
        (c.tool_name, c.input) async for c in AgentRunToolCall.objects.filter(run=run).order_by("created_at")
    ]


def scripted(forced_call: dict[str, Any] | None, plan: dict[str, Any] | None, answer: str, read: str = ""):
    """A responder by what the loop asks: the shape ("list"), the plan, the forced call, a reading of
    passages (``read``: its JSON), the answer."""

    def respond(request: dict[str, Any]) -> Plan:
        schema = constrained_schema(request)
        asked = last_user_text(request)
        if schema is not None and "oneOf" in schema:  # a forced tool call
            return Json(completion(json.dumps(forced_call)))
        if schema is not None and "passage" in (schema.get("properties") or {}):  # a reading
            return Json(completion(read))
        if schema is not None and asked.endswith("The shape of the answer:"):
            return Json(completion(json.dumps({"answer": "list"})))
        if schema is not None:  # the plan
            return Json(completion(json.dumps(plan)))
        return Stream(text_chunks(*[answer[i : i + 17] for i in range(0, len(answer), 17)]))

    return respond


def is_reading(request: dict[str, Any]) -> bool:
    return "passage" in ((constrained_schema(request) or {}).get("properties") or {})


@db
async def test_when_the_model_chooses_the_documents_the_loop_reads_them_and_cites_the_passage_that_answers(
    world, agent, guide, small_model
):
    tower = guide["tower"]
    question = "When was the Eiffel Tower finished?"
    small_model.enqueue(
        Json(completion('{"name": "search_passages", "arguments": {"query": "Eiffel Tower finished"}}')),
        Json(completion('{"passage": 1, "answer": "1889"}')),
    )

    _, frames = await sse_turn(world["client"], body(world, agent, question))

    forced, reading = small_model.requests
    assert "oneOf" in (constrained_schema(forced) or {})  # a forced tool call
    assert is_reading(reading)
    shown = last_user_text(reading)
    assert "[1] The Eiffel Tower in Paris was finished in 1889" in shown and f"Question: {question}" in shown
    assert "char_start" not in shown and "document_id" not in shown
    # The model chose the documents; the loop searched them with the whole question.
    assert await recorded_calls(frames) == [("search_passages", {"query": question})]
    answer = await stored_answer(frames)
    assert answer.content == f"1889.\n\n- {question} 1889 [paris-guide.md](passage:{tower.id})"
    citations = frames[-1]["citations"]
    assert [(c["id"], c["kind"], c["name"]) for c in citations] == [
        (str(tower.id), "passage", "paris-guide.md")
    ]
    assert citations[0]["snippet"].startswith("The Eiffel Tower in Paris")
    assert answer.citations == citations


@db
async def test_when_the_search_names_no_entity_the_loop_reads_the_documents_and_the_answer_cites_one(
    world, agent, guide, small_model
):
    tower = guide["tower"]
    question = "When was the Eiffel Tower finished?"
    small_model.enqueue(
        Json(completion('{"name": "hybrid_search", "arguments": {"query": "Eiffel Tower"}}')),
        Json(completion('{"passage": 1, "answer": "1889"}')),
    )

    _, frames = await sse_turn(world["client"], body(world, agent, question))

    # No model step for the passage search: one forced call, then one reading.
    assert len(small_model.requests) == 2 and is_reading(small_model.requests[1])
    assert await recorded_calls(frames) == [
        ("hybrid_search", {"query": "Eiffel Tower"}),
        ("search_passages", {"query": question}),
    ]
    answer = await stored_answer(frames)
    assert answer.content.startswith("1889.")
    assert [c["id"] for c in frames[-1]["citations"]] == [str(tower.id)]


@db
@pytest.mark.parametrize(
    ("read", "answered"),
    [('{"passage": 1, "answer": "1889"}', True), ('{"passage": 1, "answer": "1925"}', False)],
    ids=["held", "not-held"],
)
async def test_a_reading_is_the_answer_only_when_a_passage_shown_holds_it(
    world, agent, guide, small_model, read, answered
):
    tower = guide["tower"]
    small_model.enqueue(
        Json(completion('{"name": "search_passages", "arguments": {"query": "Eiffel Tower"}}')),
        Json(completion(read)),
    )

    _, frames = await sse_turn(world["client"], body(world, agent, "When was the Eiffel Tower finished?"))

    answer = await stored_answer(frames)
    if answered:
        assert answer.content.startswith("1889.")
        assert [(c["id"], c["kind"]) for c in frames[-1]["citations"]] == [(str(tower.id), "passage")]
    else:
        assert answer.content == "I could not find it in the knowledge graph or in the documents."
        assert frames[-1]["citations"] == []


@db
async def test_when_the_search_names_an_entity_the_loop_reads_its_cards_and_searches_no_passages(
    world, agent, guide, small_model
):
    small_model.enqueue(
        Json(completion('{"name": "search_entities", "arguments": {"query": "Paris"}}')),
        Stream(text_chunks("Paris is the capital of France.")),
    )

    _, frames = await sse_turn(world["client"], body(world, agent, "Where is Paris?"))

    assert [name for name, _ in await recorded_calls(frames)] == [
        "search_entities",
        "get_entity_edges",
        "get_entity_edges",
    ]


@db
async def test_when_the_plans_query_finds_nothing_the_loop_reads_the_documents_after_the_cards(
    world, agent, guide, museum, small_model, settings
):
    agent = await sync_to_async(planning)(agent, settings)
    prado = guide["prado"]
    question = "Which museums are in Spain?"
    plan = {"start": "Spain", "asks_for": "Museum", "relationships": ["LOCATED_IN"], "and": None}
    small_model.responder = scripted(None, plan, "", read='{"passage": 1, "answer": "The Prado"}')

    _, frames = await sse_turn(world["client"], body(world, agent, question))

    calls = await recorded_calls(frames)
    path_query = calls[1]
    assert path_query[0] == "query_paths" and path_query[1]["hops"][0]["relationship"] == "LOCATED_IN"
    assert [name for name, _ in calls[2:]] == ["get_entity_edges", "search_passages"]
    assert calls[-1][1] == {"query": question}
    # The passage that names what the question names (Spain) is read first.
    assert "[1] The Prado in Madrid is the most visited museum in Spain." in last_user_text(
        small_model.requests[-1]
    )
    answer = await stored_answer(frames)
    assert answer.content.startswith("The Prado.")
    assert [(c["id"], c["kind"]) for c in frames[-1]["citations"]] == [(str(prado.id), "passage")]


# --- a project without documents: the same requests as an agent that has no passage search ---


async def _requests(world, agent, server: LLMTestServer, question: str) -> list[dict[str, Any]]:
    server.requests.clear()
    await sse_turn(world["client"], body(world, agent, question))
    return list(server.requests)


@db
@pytest.mark.parametrize("planned", [False, True], ids=["recipe", "planned"])
async def test_a_project_without_documents_sends_the_model_the_same_requests_as_an_agent_without_passages(
    world, agent, museum, small_model, settings, planned
):
    if planned:
        agent = await sync_to_async(planning)(agent, settings)
    assert "search_passages" in agent.tools
    plan = {"start": "Spain", "asks_for": "Museum", "relationships": ["LOCATED_IN"], "and": None}
    forced = {"name": "hybrid_search", "arguments": {"query": "Atlantis"}}
    small_model.responder = scripted(forced, plan, "I could not find it in the knowledge graph.")
    questions = ["Which museums are in Spain?", "Where is Atlantis?"]

    with_tool = [await _requests(world, agent, small_model, q) for q in questions]
    agent.tools = [t for t in agent.tools if t != "search_passages"]
    await agent.asave(update_fields=["tools"])
    without_tool = [await _requests(world, agent, small_model, q) for q in questions]

    assert with_tool == without_tool
    assert "passage" not in json.dumps(with_tool)
    # The graph did not answer either question: these are the turns a passage search would follow.
    assert all(len(requests) >= 2 for requests in with_tool)

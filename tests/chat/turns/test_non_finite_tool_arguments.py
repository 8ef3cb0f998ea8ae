"""Issue #47 item 3: a number that is not finite in the arguments a model passes to a tool.

Python reads ``NaN``, ``Infinity``, ``-Infinity`` and ``1e999`` (as infinity) in JSON, and
PostgreSQL's ``jsonb`` refuses them all. Whatever provider hands the call over (a scripted one, or
an OpenAI-compatible server sending the arguments as JSON text), the call is a tool error naming
the argument, the turn goes on to its answer, and the audit trail, the conversation and the frames
keep the number as its JSON spelling (``"NaN"``), never a number PostgreSQL or a browser refuses.
"""

import json
import math

import pytest

from apps.agents.llm.scripted import text, tool_call
from apps.agents.models import AgentRunEvent, AgentRunToolCall
from apps.chat.models import Message
from tests.chat.conftest import adb, agent_request, sse_turn, tokens, types
from tests.llm_server import Stream, text_chunks, tool_call_chunks

pytestmark = pytest.mark.django_db(transaction=True)

NON_FINITE = [float("nan"), math.inf, -math.inf]


@pytest.fixture
def model(llm, settings):
    """Every turn served by the OpenAI-compatible test server; its queue is emptied after each test."""
    settings.KGCHAT_MODEL = "openai/test"
    settings.OPENAI_BASE_URL = llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    yield llm
    with llm._lock:
        llm.plans.clear()
        llm.requests.clear()


async def assert_a_tool_error_and_the_turn_answers(frames, *, call_id, argument, answer):
    tool_frames = [f for f in frames if f["type"] == "mcp_tool"]
    assert [f["status"] for f in tool_frames] == ["started", "error"]
    assert "not a finite number" in tool_frames[1]["error"] and argument in tool_frames[1]["error"]
    assert types(frames)[-1] == "done" and "error" not in types(frames)
    assert frames[-1]["messageId"] is not None
    assert tokens(frames) == answer
    json.dumps(frames, allow_nan=False)  # every frame is JSON a browser reads
    stored = await adb(lambda: list(AgentRunToolCall.objects.filter(call_id=call_id)))()
    assert len(stored) == 1 and "not a finite number" in stored[0].error
    assert tool_frames[0]["input"] == stored[0].input  # sent as it is stored
    return stored[0]


@pytest.mark.parametrize("bad", NON_FINITE, ids=["nan", "infinity", "minus-infinity"])
async def test_a_non_finite_number_a_model_passes_is_a_tool_error_and_is_stored_as_its_spelling(
    world, agent, scripted, bad
):
    arguments = {"properties": {"population": bad}}
    scripted.turns += [[tool_call("query_entities", arguments, id="nf-1")], text("I could not query that.")]

    status, frames = await sse_turn(world["client"], agent_request(world, agent, "Which cities?"))

    assert status == 200
    stored = await assert_a_tool_error_and_the_turn_answers(
        frames, call_id="nf-1", argument="properties.population", answer="I could not query that."
    )
    spelling = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[repr(bad)]
    assert stored.input == {"properties": {"population": spelling}}
    calls = await adb(lambda: [m.tool_calls for m in Message.objects.filter(role="tool")])()
    assert json.dumps(calls, allow_nan=False)
    events = await adb(lambda: [e.event for e in AgentRunEvent.objects.filter(run_id=frames[0]["runId"])])()
    assert events and json.dumps(events, allow_nan=False)


@pytest.mark.parametrize(
    ("raw", "argument"),
    [
        ('{"properties": {"population": NaN}}', "properties.population"),
        ('{"properties": {"population": -Infinity}}', "properties.population"),
        ('{"properties": {"population": 1e999}}', "properties.population"),
    ],
    ids=["nan", "minus-infinity", "overflow"],
)
async def test_non_finite_arguments_from_an_openai_compatible_server_are_a_tool_error_not_a_failed_turn(
    world, agent, model, raw, argument
):
    model.enqueue(
        Stream(tool_call_chunks("query_entities", raw, call_id="nf-2"), finish_reason="tool_calls"),
        Stream(text_chunks("No such ", "population.")),
    )

    status, frames = await sse_turn(world["client"], agent_request(world, agent, "Which cities?"))

    assert status == 200
    stored = await assert_a_tool_error_and_the_turn_answers(
        frames, call_id="nf-2", argument=argument, answer="No such population."
    )
    assert stored.input["properties"]["population"] in ("NaN", "-Infinity", "Infinity")

"""Faults of the model server and of tools, through the real transports (issue 7).

The model is ``openai/test`` served by ``tests.llm_server.LLMTestServer``, a local
OpenAI-compatible HTTP server that misbehaves on purpose. Every fault must end in the frame
sequence of PROTOCOL §3 (a model failure: ``error`` ``llm_error`` then ``done`` with
``messageId: null``, the user message kept and no assistant message; a tool failure: an
``mcp_tool`` ``error`` frame and the agent goes on), leave no ``kb.agent_runs`` row ``running``
and release the conversation, so the next message of the same conversation is answered.
"""

import asyncio
import dataclasses

import pytest
from channels.testing import WebsocketCommunicator

from apps.agents.models import AgentRun
from apps.chat.models import Conversation, Message
from apps.graph_tools import registry
from config.asgi import application
from tests.chat.conftest import adb, agent_request, session_cookie, sse_turn, tokens, types
from tests.llm_server import Status, Stream, text_chunks, tool_call_chunks

pytestmark = pytest.mark.django_db(transaction=True)

RETRY_NOW = {"Retry-After": "0"}


@pytest.fixture
def model(llm, settings):
    """Every turn served by the misbehaving server; its queue is emptied after each test."""
    settings.KGCHAT_MODEL = "openai/test"
    settings.OPENAI_BASE_URL = llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    yield llm
    with llm._lock:
        llm.plans.clear()
        llm.requests.clear()


async def ws_turn(user, payload):
    """One turn over the websocket; return its frames up to ``done``."""
    communicator = WebsocketCommunicator(application, "/ws/chat/", headers=[(b"origin", b"http://127.0.0.1")])
    session = await adb(session_cookie)(user)
    communicator.scope["headers"].append((b"cookie", f"sessionid={session}".encode()))
    connected, _ = await communicator.connect()
    assert connected
    await communicator.send_json_to({"type": "chat.message", **payload})
    frames = []
    while not frames or frames[-1]["type"] != "done":
        frames.append(await communicator.receive_json_from(timeout=20))
    await communicator.disconnect()
    from apps.chat.turns.service import turn_wait_all

    await turn_wait_all()
    return frames


async def turn(transport, world, payload):
    if transport == "sse":
        status, frames = await sse_turn(world["client"], payload)
        assert status == 200
        return frames
    return await ws_turn(world["user"], payload)


async def assert_model_failure(frames, *, partial=""):
    """PROTOCOL §3: ``error`` ``llm_error`` then ``done`` with no message; user message kept."""
    assert types(frames)[0] == "meta" and types(frames)[-2:] == ["error", "done"]
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert frames[-2]["code"] == "llm_error"
    assert frames[-1]["messageId"] is None and frames[-1]["runId"] == frames[0]["runId"]
    assert tokens(frames) == partial
    rows = [
        (m.role, m.content)
        async for m in Message.objects.filter(conversation_id=frames[0]["conversationId"]).order_by(
            "created_at"
        )
    ]
    assert rows[-1][0] == "user"
    run = await AgentRun.objects.aget(id=frames[0]["runId"])
    assert (run.status, run.stop_reason) == ("error", "llm_error")
    assert run.final_text == partial


async def assert_settled_and_usable(world, model, frames, transport):
    """Nothing left running, the conversation released: the next message is answered."""
    conversation_id = frames[0]["conversationId"]
    assert not await AgentRun.objects.filter(status="running").aexists()
    assert (await Conversation.objects.aget(id=conversation_id)).active_turn_id is None
    model.enqueue(Stream(text_chunks("still ", "here.")))

    again = await turn(transport, world, {"message": "And now?", "conversationId": conversation_id})

    assert types(again) == ["meta", "token", "token", "done"]
    answer = await Message.objects.aget(id=again[-1]["messageId"])
    assert answer.content == tokens(again) == "still here."


@pytest.mark.parametrize("transport", ["sse", "ws"])
async def test_http_500_from_the_model_ends_with_llm_error_and_no_answer(world, agent, model, transport):
    # The provider retries a 500 three times before it gives up.
    model.enqueue(*[Status(500, headers=RETRY_NOW) for _ in range(4)])

    frames = await turn(transport, world, agent_request(world, agent))

    assert types(frames) == ["meta", "error", "done"]
    assert "HTTP 500" in frames[1]["error"]
    assert len(model.requests) == 4
    await assert_model_failure(frames)
    await assert_settled_and_usable(world, model, frames, transport)


async def test_429_then_success_is_retried_and_answers_once(world, agent, model):
    model.enqueue(
        Status(429, {"error": {"message": "slow down"}}, headers=RETRY_NOW),
        Stream(text_chunks("paris ", "is on the Seine.")),
    )

    frames = await turn("ws", world, agent_request(world, agent))

    assert types(frames) == ["meta", "token", "token", "done"]
    assert len(model.requests) == 2
    roles = [
        (m.role, m.content)
        async for m in Message.objects.filter(conversation_id=frames[0]["conversationId"]).order_by(
            "created_at"
        )
    ]
    assert roles == [("user", "Where is Paris?"), ("assistant", "paris is on the Seine.")]
    assert (await AgentRun.objects.aget(id=frames[0]["runId"])).status == "success"
    await assert_settled_and_usable(world, model, frames, "ws")


async def test_a_stream_that_stops_midway_is_an_llm_error_and_is_not_replayed(world, agent, model):
    model.enqueue(Stream(text_chunks("Paris is ", "the cap"), truncate=True))

    frames = await turn("sse", world, agent_request(world, agent))

    assert types(frames) == ["meta", "token", "token", "error", "done"]
    assert "ended before it finished" in frames[3]["error"]
    assert len(model.requests) == 1
    await assert_model_failure(frames, partial="Paris is the cap")
    await assert_settled_and_usable(world, model, frames, "sse")


async def test_malformed_json_in_tool_call_arguments_is_an_llm_error(world, agent, model):
    model.enqueue(Stream(tool_call_chunks("hybrid_search", '{"query": "Par'), finish_reason="tool_calls"))

    frames = await turn("ws", world, agent_request(world, agent))

    assert types(frames) == ["meta", "error", "done"]
    assert "malformed tool-call arguments for 'hybrid_search'" in frames[1]["error"]
    await assert_model_failure(frames)
    await assert_settled_and_usable(world, model, frames, "ws")


def replace_handler(monkeypatch, name, handler):
    tool = registry.tool_get(name)
    monkeypatch.setitem(registry._REGISTRY, name, dataclasses.replace(tool, handler=handler))


async def test_a_tool_that_raises_is_an_mcp_tool_error_and_the_agent_goes_on(
    world, agent, model, monkeypatch
):
    async def broken(ctx, args):
        raise RuntimeError("index corrupted")

    replace_handler(monkeypatch, "hybrid_search", broken)
    model.enqueue(
        Stream(
            tool_call_chunks("hybrid_search", {"query": "Paris"}, call_id="c1"), finish_reason="tool_calls"
        ),
        Stream(text_chunks("The search failed; I cannot tell.")),
    )

    frames = await turn("sse", world, agent_request(world, agent))

    assert types(frames) == ["meta", "mcp_tool", "mcp_tool", "token", "done"]
    assert frames[1]["status"] == "started" and frames[2]["status"] == "error"
    assert frames[2]["callId"] == "c1" and "index corrupted" in frames[2]["error"]
    # The model was told about the failure and answered.
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "index corrupted" in tool_message["content"]
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert answer.content == tokens(frames) == "The search failed; I cannot tell."
    run = await AgentRun.objects.aget(id=frames[0]["runId"])
    assert run.status == "success"
    calls = [c async for c in run.tool_calls.all()]
    assert len(calls) == 1 and "index corrupted" in calls[0].error
    await assert_settled_and_usable(world, model, frames, "sse")


async def test_a_tool_that_hangs_past_its_timeout_is_an_mcp_tool_error_and_the_agent_goes_on(
    world, agent, model, monkeypatch, settings
):
    settings.KGCHAT_TOOL_TIMEOUT_SECONDS = 1
    hung = asyncio.Event()

    async def hangs(ctx, args):
        await hung.wait()
        return {"results": []}

    replace_handler(monkeypatch, "hybrid_search", hangs)
    model.enqueue(
        Stream(
            tool_call_chunks("hybrid_search", {"query": "Paris"}, call_id="c1"), finish_reason="tool_calls"
        ),
        Stream(text_chunks("The search timed out.")),
    )

    frames = await turn("ws", world, agent_request(world, agent))

    assert types(frames) == ["meta", "mcp_tool", "mcp_tool", "token", "done"]
    assert frames[2]["status"] == "error" and frames[2]["error"] == "tool timed out after 1 s"
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and '"code": "timeout"' in tool_message["content"]
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert answer.content == "The search timed out."
    assert (await AgentRun.objects.aget(id=frames[0]["runId"])).status == "success"
    await assert_settled_and_usable(world, model, frames, "ws")

"""A turn whose server process died is ended by another process exactly as its own would have
ended it (issue #47 item 11; docs/protocol.md §3 ``cancelled``, §4 ``chat.subscribe`` with
``afterSeq``).

Two processes of one installation: ``make run``'s, and a second daphne beside it. An agent turn
on the second makes a graph write (``create_entity``, written without approval) and streams ten
words; that process is frozen, the turn cancelled through the first, then the frozen one killed:
the first takes the turn over. What a client then gets and finds stored is compared with the same
turn cancelled in its own process.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.blackbox.clients import Api, socket
from tests.blackbox.model import ScriptedModel
from tests.blackbox.server import Beside, Kgchat, start_beside
from tests.blackbox.shapes import Turn
from tests.blackbox.world import World

CANCEL = "POST /api/chat/conversations/{conversation_id}/cancel"
CONVERSATION = "GET /api/chat/conversations/{conversation_id}"
RUN = "GET /api/agent-runs/{run_id}"
WORDS = "".join(f"word{i} " for i in range(10))


@pytest.fixture(scope="module")
def writer(world: World) -> str:
    """An agent of Atlas that writes to the graph without asking for approval."""
    created = world.api("ada").call(
        "POST /api/projects/{project_id}/agent-definitions",
        201,
        json={
            "name": "city-writer",
            "description": "Adds cities.",
            "systemPrompt": "You add cities to the graph.",
            "model": {"name": "openai/test-model", "temperature": 0.2},
            "tools": ["create_entity"],
            "toolPolicy": {"create_entity": {"approval": "never"}},
            "maxSteps": 4,
        },
        project_id=world.project_id,
    )
    return str(created.json()["id"])


@pytest.fixture
def beside(kgchat: Kgchat, tmp_path: Path) -> Iterator[Beside]:
    process = start_beside(kgchat, tmp_path / "beside.log")
    yield process
    process.kill()


def _body(world: World, writer: str, city: str, gate: str) -> dict[str, Any]:
    arguments = json.dumps({"key": f"city:{city.lower()}", "type": "City", "name": city})
    return {
        "message": f"#tool create_entity {arguments}\n#hold {gate}\nAdd {city}.",
        "projectId": world.project_id,
        "agentDefinitionId": writer,
    }


def _until_ten_words(frames: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    for frame in frames:
        seen.append(frame)
        if "".join(f["token"] for f in seen if f["type"] == "token") == WORDS:
            return seen
    raise AssertionError(f"the turn ended before its ten words: {seen}")


def _stored(api: Api, conversation_id: str, run_id: str) -> dict[str, Any]:
    """What a turn stored, as a client reads it back, without what names its own city."""
    messages = api.call(CONVERSATION, 200, conversation_id=conversation_id).json()["messages"]
    run = api.call(RUN, 200, run_id=run_id).json()
    return {
        "messages": [
            (
                m["role"],
                m["content"] if m["role"] == "assistant" else "",
                [(c["id"], c["name"]) for c in m["toolCalls"]],
                (m["retrievalContext"] or {}).get("stop_reason"),
                len((m["retrievalContext"] or {}).get("entity_ids") or []),
            )
            for m in messages[1:]
        ],
        "run": (run["status"], run["stopReason"], run["error"], run["stepCount"]),
        "toolCalls": [
            (c["callId"], c["toolName"], c["error"], (c["output"] or {}).get("changed"))
            for c in run["toolCalls"]
        ],
        "trace": sorted((m["stepNumber"], m["role"], len(m["toolCalls"])) for m in run["messages"]),
    }


def _ending(frames: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (f["type"], f.get("code"), f.get("messageId") is not None, f.get("runId") is not None)
        for f in frames
        if f["type"] in ("error", "done")
    ]


async def test_a_turn_cancelled_after_its_process_died_is_stored_and_reported_as_one_cancelled_in_process(
    world: World, writer: str, beside: Beside, model: ScriptedModel
) -> None:
    ada = world.api("ada")
    with ada.streaming(_body(world, writer, "Lyon", "takeover-here")) as frames:
        seen = _until_ten_words(frames)
        ada.call(CANCEL, 200, conversation_id=seen[0]["conversationId"])
        in_process = Turn([*seen, *frames])
    model.release("takeover-here")
    on_beside = Api(beside.url, world.openapi).login("ada")
    with on_beside.streaming(_body(world, writer, "Nantes", "takeover-there")) as frames:
        before = _until_ten_words(frames)
        await asyncio.sleep(2)  # the turn saves where it is at most a second after its last words
        beside.signal(signal.SIGSTOP)
        conversation_id, run_id = before[0]["conversationId"], before[0]["runId"]

        cancelled = ada.call(CANCEL, 200, conversation_id=conversation_id).json()
        beside.kill()
    on_beside.close()
    async with socket(ada) as ws:
        await ws.send(
            {"type": "chat.subscribe", "conversationId": conversation_id, "afterSeq": before[-1]["seq"]}
        )
        after = await ws.frames_until_done()
    model.release("takeover-there")

    assert cancelled == {"cancelled": True}
    assert (
        _ending(after)
        == _ending(in_process.frames)
        == [
            ("error", "cancelled", False, False),
            ("done", None, True, True),
        ]
    )
    assert [f["seq"] for f in after] == [before[-1]["seq"] + 1, before[-1]["seq"] + 2]
    stored = _stored(ada, conversation_id, run_id)
    assert stored == _stored(ada, in_process.meta["conversationId"], in_process.meta["runId"])
    assert stored["messages"][-1][:2] == ("assistant", WORDS)
    assert stored["toolCalls"] == [("call_create_entity", "create_entity", None, True)]
    answer = ada.call(CONVERSATION, 200, conversation_id=conversation_id).json()["messages"][-1]
    assert after[-1]["messageId"] == answer["id"] and after[-1]["runId"] == run_id

"""Issue #47 item 11: a turn ended by another process than its own stores and reports exactly what
it would have in its own process: cancelled, failed after its retries, resumed, and with its
conversation deleted.

Each test plays the same turn twice: in process (``turn_start``, stopped there) and as a dead
process left it (its rows, and the ADK events ``adk_run`` stored before it was cut off: a tool call
with its result, then ten words streamed), ended by ``turns_take_over``. What each stores (the
run's tool calls and messages, the conversation's rows, its known entities) and its last frames
must be the same.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from apps.agents.llm.base import Done, ErrorEvent, TextDelta, Usage
from apps.agents.llm.scripted import Delay, ScriptedProvider, tool_call
from apps.agents.models import AgentRun, AgentRunMessage, AgentRunToolCall
from apps.agents.services import worker_name
from apps.chat.conversations.lifecycle import conversation_delete
from apps.chat.models import Conversation, Message
from apps.chat.streams.bus import get_bus
from apps.chat.streams.frames import TokenFrame
from apps.chat.turns.service import turn_cancel, turn_start, turn_wait_all, turns_take_over
from apps.projects.selectors import Principal
from tests.chat.conftest import adb
from tests.chat.turns.test_takeover import _cut_off, _dead_turn, _frames

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = [f"word{i} " for i in range(10)]
SHOWN = "".join(WORDS)


def _script(*, then: list | None = None) -> list:
    """A tool call with its result, then ten words, then ``then`` (by default: nothing, ever)."""
    return [
        [tool_call("list_entity_types", {}, id="c1"), Done(usage=Usage(output_tokens=2))],
        [*(TextDelta(text=w) for w in WORDS), *(then if then is not None else [Delay(3600)])],
    ]


async def _in_process(world, agent, *, then: list | None = None, stop: str = "cancel") -> tuple[str, list]:
    """The turn in its own process, stopped (``cancel``, ``delete``) once its ten words are out,
    or run to its end (``none``). Its conversation id and frames."""
    held, release = asyncio.Event(), asyncio.Event()

    async def hold(_seconds: float) -> None:
        held.set()
        await release.wait()

    principal = Principal(user=world["user"])
    handle = await turn_start(
        principal=principal,
        message="Which types exist?",
        project_id=world["project"].id,
        agent_definition_id=agent.id,
        provider=ScriptedProvider(turns=_script(then=then), sleep=hold),
    )
    if stop != "none":
        await asyncio.wait_for(held.wait(), 30)
        await asyncio.wait_for(_shown(handle.conversation_id), 30)
        if stop == "cancel":
            assert await turn_cancel(principal=principal, conversation_id=handle.conversation_id)
        else:
            await conversation_delete(principal=principal, conversation_id=handle.conversation_id)
    await turn_wait_all()
    release.set()
    conversation = Conversation(id=handle.conversation_id)
    return handle.conversation_id, await _frames(conversation) if stop != "delete" else []


async def _shown(conversation_id: str) -> None:
    """Until the turn's ten words are out to its clients."""
    shown = ""
    async for frame in get_bus().subscribe(conversation_id):
        shown += frame.token if isinstance(frame, TokenFrame) else ""
        if shown == SHOWN:
            return


async def _dead(world, agent) -> tuple[Conversation, AgentRun]:
    """The same turn as its process left it when it died after the ten words."""
    conversation, run = await adb(_dead_turn)(world, agent, text=SHOWN)
    assert run is not None
    await _cut_off(agent, run, ScriptedProvider(turns=_script()))
    return conversation, run


async def _stored(conversation_id: Any) -> dict[str, Any]:
    """What a turn stored, without its ids and times."""
    run = await AgentRun.objects.filter(conversation_id=conversation_id).alatest("started_at")
    calls = sorted(
        [
            (c.call_id, c.tool_name, c.input, c.output, c.error, c.step_number)
            async for c in AgentRunToolCall.objects.filter(run=run)
        ],
        key=repr,
    )
    trace = sorted(
        [
            (m.step_number, m.role, m.content, [t.get("id") for t in m.tool_calls])
            async for m in AgentRunMessage.objects.filter(run=run)
        ],
        key=repr,
    )
    rows = [
        (
            m.role,
            m.content,
            [(t.get("id"), t.get("name")) for t in m.tool_calls],
            sorted(m.retrieval_context or {}),
            (m.retrieval_context or {}).get("stop_reason"),
            (m.retrieval_context or {}).get("entity_ids"),
            m.citations,
        )
        async for m in Message.objects.filter(conversation_id=conversation_id)
        .exclude(role="user")
        .order_by("created_at", "id")
    ]
    known = (
        await Conversation.objects.filter(id=conversation_id)
        .values_list("known_entities", flat=True)
        .afirst()
    )
    return {
        "run": (run.status, run.stop_reason, run.error, run.final_text, run.step_count),
        "tool_calls": calls,
        "trace": trace,
        "rows": rows,
        "known": known,
    }


def _last_frames(frames: list) -> list:
    """The frames that end a turn, as a client reads them (``messageId`` set or not)."""
    ending = [f for f in frames if f.type in ("error", "done")]
    return [
        (
            f.type,
            getattr(f, "code", None),
            bool(getattr(f, "messageId", None)),
            bool(getattr(f, "runId", None)),
        )
        for f in ending
    ]


async def test_a_turn_cancelled_after_its_process_died_is_stored_and_reported_as_one_cancelled_in_process(
    world, agent
):
    in_process_id, in_process_frames = await _in_process(world, agent)
    conversation, _ = await _dead(world, agent)

    assert await turn_cancel(principal=Principal(user=world["user"]), conversation_id=conversation.id)
    await turns_take_over(ScriptedProvider())
    frames = await _frames(conversation)

    assert (
        _last_frames(frames)
        == _last_frames(in_process_frames)
        == [
            ("error", "cancelled", False, False),
            ("done", None, True, True),
        ]
    )
    assert not [f for f in frames if f.type == "token"]  # its clients saw the ten words already
    stored, in_process = await _stored(conversation.id), await _stored(in_process_id)
    assert stored == in_process
    assert stored["tool_calls"][0][:2] == ("c1", "list_entity_types")
    assert [r[:3] for r in stored["rows"]] == [
        ("assistant", "", [("c1", "list_entity_types")]),
        ("tool", stored["rows"][1][1], [("c1", "list_entity_types")]),
        ("assistant", SHOWN, []),
    ]
    answer = await Message.objects.filter(conversation=conversation, role="assistant").alast()
    assert frames[-1].messageId == str(answer.id)


async def test_a_turn_whose_process_died_too_often_is_stored_and_reported_as_a_failed_one(
    world, agent, settings
):
    settings.KGCHAT_TURN_MAX_ATTEMPTS = 1
    in_process_id, in_process_frames = await _in_process(
        world, agent, then=[ErrorEvent(error="the model server went away")], stop="none"
    )
    conversation, _ = await _dead(world, agent)

    await turns_take_over(ScriptedProvider())
    frames = await _frames(conversation)

    assert _last_frames(frames) == [
        ("error", "turn_failed_repeatedly", False, False),
        ("done", None, False, True),
    ]
    assert _last_frames(in_process_frames) == [
        ("error", "llm_error", False, False),
        ("done", None, False, True),
    ]
    stored, in_process = await _stored(conversation.id), await _stored(in_process_id)
    assert stored["run"][:2] == ("error", "turn_failed_repeatedly")
    assert in_process["run"][:2] == ("error", "llm_error")
    assert {k: v for k, v in stored.items() if k != "run"} == {
        k: v for k, v in in_process.items() if k != "run"
    }
    assert stored["run"][3:] == in_process["run"][3:]  # the text it had shown, its steps
    assert stored["tool_calls"][0][:2] == ("c1", "list_entity_types")


async def test_a_turn_resumed_after_its_process_died_stores_what_it_would_have_in_process(world, agent):
    in_process_id, in_process_frames = await _in_process(
        world, agent, then=[Done(usage=Usage(output_tokens=10))], stop="none"
    )
    conversation, _ = await _dead(world, agent)

    # The model's interrupted answer is asked again; its text goes on past what was shown.
    await turns_take_over(
        ScriptedProvider(turns=[[*(TextDelta(text=w) for w in WORDS), Done(usage=Usage())]])
    )
    frames = await _frames(conversation)

    assert _last_frames(frames) == _last_frames(in_process_frames) == [("done", None, True, True)]
    stored, in_process = await _stored(conversation.id), await _stored(in_process_id)
    assert stored == in_process


async def test_a_turn_whose_conversation_was_deleted_after_its_process_died_stores_its_run_as_in_process(
    world, agent
):
    in_process_id, _ = await _in_process(world, agent, stop="delete")
    conversation, run = await _dead(world, agent)
    await AgentRun.objects.filter(id=run.id).aupdate(started_at=run.started_at - timedelta(minutes=1))

    await conversation_delete(principal=Principal(user=world["user"]), conversation_id=conversation.id)
    await turns_take_over(ScriptedProvider())

    stored, in_process = await _stored(conversation.id), await _stored(in_process_id)
    assert stored == in_process
    assert stored["run"][:3] == ("cancelled", "cancelled", "the conversation was deleted")
    assert stored["tool_calls"][0][:2] == ("c1", "list_entity_types")


async def test_a_run_of_a_deleted_conversation_whose_process_here_is_alive_is_left_to_end_itself(
    world, agent
):
    conversation, run = await _dead(world, agent)
    await AgentRun.objects.filter(id=run.id).aupdate(
        worker=worker_name(), started_at=run.started_at - timedelta(minutes=1)
    )

    await conversation_delete(principal=Principal(user=world["user"]), conversation_id=conversation.id)
    await turns_take_over(ScriptedProvider())

    assert (await AgentRun.objects.aget(id=run.id)).status == "running"

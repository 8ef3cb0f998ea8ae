"""Issue #27: a turn whose lease lapsed (its process died) is taken over by another process.

The dead process is played by rows: its claim (lease lapsed, worker a pid that is gone) and, for an
agent turn, its run and the ADK events ``adk_run`` stored before it was cut off. ``turns_take_over``
is what every process runs every third of the lease. Real SIGKILLs: ``test_resume_kill.py``.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.agents.adk.run_state import RunState
from apps.agents.adk.runner import adk_run
from apps.agents.llm.base import Done, TextDelta, Usage
from apps.agents.llm.scripted import Delay, ScriptedProvider, tool_call
from apps.agents.models import AgentRun, AgentRunToolCall
from apps.chat.models import Conversation, Message
from apps.chat.streams.bus import get_bus
from apps.chat.streams.frames import TokenFrame
from apps.chat.turns.service import turn_cancel, turn_start, turn_wait_all, turns_take_over
from apps.projects.selectors import Principal
from tests.chat.conftest import adb

pytestmark = pytest.mark.django_db(transaction=True)

DEAD = f"{socket.gethostname()}:4194303"


def _dead_turn(world, agent, *, text: str = "", agentic: bool = True) -> tuple[Conversation, AgentRun | None]:
    conversation = Conversation.objects.create(
        project=world["project"], user=world["user"], agent_definition=agent if agentic else None
    )
    Message.objects.create(conversation=conversation, role="user", content="Which types exist?")
    run = None
    if agentic:
        run = AgentRun.objects.create(
            project=world["project"],
            agent_definition=agent,
            conversation_id=conversation.id,
            worker=DEAD,
            final_text=text,
            graph_version=1,
        )
    Conversation.objects.filter(id=conversation.id).update(
        active_turn_id=uuid.uuid4(),
        active_turn_started_at=timezone.now(),
        active_turn_worker=DEAD,
        active_turn_text="" if agentic else text,
        active_turn_lease_until=timezone.now() - timedelta(seconds=1),
    )
    return conversation, run


async def _cut_off(agent, run: AgentRun, provider: ScriptedProvider) -> None:
    """The dead process's attempt: run until its last scripted model call, then stop dead."""
    state = RunState(callback=None, max_steps=5)
    task = asyncio.create_task(
        adk_run(
            state,
            definition=agent,
            provider=provider,
            message="Which types exist?",
            history=[],
            project_id=agent.project_id,
            sub_definitions=[],
            run_id=run.id,
            user_id="u",
            stop=None,
            share_provider=True,
        )
    )
    for _ in range(3000):
        if len(provider.calls) == len(provider.turns):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def _frames(conversation: Conversation) -> list:
    await turn_wait_all()
    return [f async for f in get_bus().subscribe(str(conversation.id))]


def _answer() -> list:
    return [TextDelta(text="There is "), TextDelta(text="1 type."), Done(usage=Usage(output_tokens=4))]


async def test_an_agent_turn_whose_lease_lapsed_resumes_here_and_stores_its_answer_once(world, agent):
    conversation, run = await adb(_dead_turn)(world, agent)
    await _cut_off(
        agent, run, ScriptedProvider(turns=[[tool_call("list_entity_types", {}, id="c1")], [Delay(3600)]])
    )
    provider = ScriptedProvider(turns=[_answer()])

    assert await turns_take_over(provider) == 1
    frames = await _frames(conversation)

    assert [f.type for f in frames] == ["token", "token", "done"]  # no second meta, no tool chip again
    assert "".join(f.token for f in frames if isinstance(f, TokenFrame)) == "There is 1 type."
    assert len(provider.calls) == 1
    run = await AgentRun.objects.aget(id=run.id)
    assert (run.status, run.attempts, run.step_count) == ("success", 2, 2)
    assert [c.call_id async for c in AgentRunToolCall.objects.filter(run=run)] == ["c1"]
    answers = [m.content async for m in Message.objects.filter(conversation=conversation, role="assistant")]
    assert answers[-1] == "There is 1 type."
    assert not await Conversation.objects.filter(id=conversation.id, active_turn_id__isnull=False).aexists()
    assert await turns_take_over(provider) == 0  # taken once


async def test_the_cut_off_calls_text_already_shown_is_not_sent_again(world, agent):
    conversation, run = await adb(_dead_turn)(world, agent, text="There is ")
    await _cut_off(
        agent,
        run,
        ScriptedProvider(
            turns=[[tool_call("list_entity_types", {}, id="c1")], [TextDelta(text="There is "), Delay(3600)]]
        ),
    )

    await turns_take_over(ScriptedProvider(turns=[_answer()]))
    frames = await _frames(conversation)

    # The in-process bus lost the frames: what the run had saved stands for what was shown.
    assert "".join(f.token for f in frames if isinstance(f, TokenFrame)) == "1 type."
    answer = await Message.objects.filter(conversation=conversation, role="assistant").alast()
    assert answer.content == "There is 1 type."


async def test_a_turn_whose_process_died_too_often_ends_with_turn_failed_repeatedly(world, agent, settings):
    settings.KGCHAT_TURN_MAX_ATTEMPTS = 2
    conversation, run = await adb(_dead_turn)(world, agent)
    await AgentRun.objects.filter(id=run.id).aupdate(attempts=2)

    await turns_take_over(ScriptedProvider(turns=[_answer()]))
    frames = await _frames(conversation)

    assert [(f.type, getattr(f, "code", None)) for f in frames] == [
        ("error", "turn_failed_repeatedly"),
        ("done", None),
    ]
    run = await AgentRun.objects.aget(id=run.id)
    assert (run.status, run.stop_reason, run.attempts) == ("error", "turn_failed_repeatedly", 3)
    assert not await Message.objects.filter(conversation=conversation, role="assistant").aexists()
    assert not await Conversation.objects.filter(id=conversation.id, active_turn_id__isnull=False).aexists()


async def test_a_cancel_sent_while_no_process_runs_the_turn_wins_over_resumption(world, agent):
    conversation, run = await adb(_dead_turn)(world, agent, text="Half")
    provider = ScriptedProvider(turns=[_answer()])

    assert await turn_cancel(principal=Principal(user=world["user"]), conversation_id=conversation.id)
    await turns_take_over(provider)
    frames = await _frames(conversation)

    assert [(f.type, getattr(f, "code", None)) for f in frames] == [("error", "cancelled"), ("done", None)]
    assert provider.calls == []
    run = await AgentRun.objects.aget(id=run.id)
    assert run.status == "cancelled"
    answer = await Message.objects.aget(conversation=conversation, role="assistant")
    assert (answer.content, answer.retrieval_context["stop_reason"]) == ("Half", "cancelled")


async def test_a_conversation_deleted_while_no_process_runs_its_turn_is_not_resumed(world, agent):
    conversation, run = await adb(_dead_turn)(world, agent)
    await AgentRun.objects.filter(id=run.id).aupdate(started_at=timezone.now() - timedelta(minutes=1))
    await conversation.adelete()
    provider = ScriptedProvider(turns=[_answer()])

    assert await turns_take_over(provider) == 0

    assert provider.calls == []
    assert (await AgentRun.objects.aget(id=run.id)).status == "cancelled"


async def test_a_plain_turn_whose_process_died_ends_interrupted_with_its_saved_text(world, agent):
    conversation, _ = await adb(_dead_turn)(world, agent, text="Half an ans", agentic=False)

    await turns_take_over()
    frames = await _frames(conversation)

    assert [(f.type, getattr(f, "code", None)) for f in frames] == [("error", "interrupted"), ("done", None)]
    answer = await Message.objects.aget(conversation=conversation, role="assistant")
    assert (answer.content, answer.retrieval_context["stop_reason"]) == ("Half an ans", "interrupted")


def _paused_then_decided(world, agent, conversation: Conversation) -> None:
    """The conversation's last row is a paused answer carrying call w1, whose approval was approved."""
    from apps.graph_tools.models import WriteApproval

    approval = WriteApproval.objects.create(
        project=world["project"],
        tool_name="create_entity",
        arguments={"key": "city:lyon", "type": "City", "name": "Lyon"},
        status="approved",
        conversation_id=conversation.id,
        call_id="w1",
        result={"changed": True, "summary": "Create entity Lyon"},
        expires_at=timezone.now() + timedelta(hours=1),
    )
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="",
        tool_calls=[{"id": "w1", "name": "create_entity", "input": approval.arguments}],
        retrieval_context={"stop_reason": "approval_required", "approval_id": str(approval.id)},
    )


async def test_a_continuation_after_an_approval_that_died_before_its_first_event_resumes_from_the_decision(
    world, agent
):
    conversation, run = await adb(_dead_turn)(world, agent)
    await adb(_paused_then_decided)(world, agent, conversation)
    provider = ScriptedProvider(
        turns=[[TextDelta(text="Lyon is added."), Done(usage=Usage(output_tokens=3))]]
    )

    await turns_take_over(provider)
    frames = await _frames(conversation)

    # Its new message is the decided call's result again, not the user's question.
    (call,) = provider.calls
    assert call.messages[-1].role == "tool" and "Create entity Lyon" in call.messages[-1].content
    assert "".join(f.token for f in frames if isinstance(f, TokenFrame)) == "Lyon is added."
    assert (await AgentRun.objects.aget(id=run.id)).status == "success"


async def test_a_turn_this_process_still_runs_is_not_taken_over_here_when_its_lease_lapsed(world, agent):
    """A heartbeat starved of CPU longer than the lease lets a live turn's lease lapse; this same
    process's takeover loop must not start a second run of it beside the first (the answer would
    stream and be stored twice)."""
    held, release = asyncio.Event(), asyncio.Event()

    async def hold(_seconds: float) -> None:
        held.set()
        await release.wait()

    provider = ScriptedProvider(
        turns=[[TextDelta(text="There is "), Delay(1), TextDelta(text="1 type."), Done(usage=Usage())]],
        sleep=hold,
    )
    principal = Principal(user=world["user"])
    handle = await turn_start(
        principal=principal,
        message="Which types exist?",
        project_id=world["project"].id,
        agent_definition_id=agent.id,
        provider=provider,
    )
    await asyncio.wait_for(held.wait(), 30)
    lapsed = await Conversation.objects.filter(id=handle.conversation_id).aupdate(
        active_turn_lease_until=timezone.now() - timedelta(seconds=1)
    )
    assert lapsed == 1

    assert await turns_take_over(ScriptedProvider(turns=[_answer()])) == 0
    assert await Conversation.objects.filter(
        id=handle.conversation_id, active_turn_id__isnull=False
    ).aexists()

    release.set()
    frames = await _frames(await Conversation.objects.aget(id=handle.conversation_id))
    assert "".join(f.token for f in frames if isinstance(f, TokenFrame)) == "There is 1 type."
    run = await AgentRun.objects.aget(conversation_id=handle.conversation_id)
    assert (run.status, run.attempts) == ("success", 1)
    answers = [
        m.content
        async for m in Message.objects.filter(conversation_id=handle.conversation_id, role="assistant")
    ]
    assert answers == ["There is 1 type."]


def _admitted_then_died(world, agent, conversation_id=None):
    """A message admitted (claimed, its rows written) by a process that died before its turn
    published anything, not even ``meta``."""
    from apps.chat.turns import admission
    from apps.projects.selectors import principal_from_user

    turn, _ = admission.turn_admit(
        principal=principal_from_user(world["user"]),
        message="Which types exist?",
        project_id=None if conversation_id else world["project"].id,
        conversation_id=conversation_id,
        agent_definition_id=None if conversation_id else agent.id,
    )
    claimed = Conversation.objects.get(id=turn.conversation.id).active_turn_shown
    Conversation.objects.filter(id=turn.conversation.id).update(
        active_turn_worker=DEAD, active_turn_lease_until=timezone.now() - timedelta(seconds=1)
    )
    return turn.conversation, claimed


async def test_a_turn_whose_process_died_right_after_its_claim_goes_on_after_the_meta_it_counted(
    world, agent
):
    from apps.chat.turns.turn import CLAIMED_MARK

    conversation, claimed = await adb(_admitted_then_died)(world, agent)

    assert claimed == CLAIMED_MARK  # the claim counts ``meta`` (seq 1) before it is published
    assert await turns_take_over(ScriptedProvider(turns=[_answer()])) == 1
    frames = await _frames(conversation)
    # meta is never sent again by a takeover: the frames go on at seq 2, whether or not it got out.
    assert [(f.seq, f.type) for f in frames] == [(2, "token"), (3, "token"), (4, "done")]

    _, claimed_again = await adb(_admitted_then_died)(world, agent, conversation.id)
    assert claimed_again == CLAIMED_MARK  # a follow-up's claim as well

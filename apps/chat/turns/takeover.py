"""Taking over a turn whose process died: what becomes of it, and the ``Turn`` it goes on as.

``recovery.turns_expired_take`` claims the turns whose lease lapsed and decides each one's outcome;
here a resumed agent turn is rebuilt (``taken_over_turn``: its run's next attempt, the decided
approval it continued) and an ending one gets its last frames (``taken_over_end``). The turn
service runs the resumed ones (``service.turns_take_over``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from asgiref.sync import sync_to_async

from apps.agents.events import StopSignal, ToolResume
from apps.agents.executor import AgentExecutor
from apps.agents.models import AgentRun
from apps.agents.services import agent_run_take_over
from apps.chat.models import Conversation, Message, MessageRole
from apps.chat.streams.bus import get_bus
from apps.chat.streams.frames import DoneFrame, ErrorFrame
from apps.chat.turns import admission
from apps.chat.turns.claim import claim_release
from apps.chat.turns.recovery import (
    Takeover,
    decided_approvals_never_continued,
    runs_of_deleted_conversations,
    turns_expired_take,
)
from apps.chat.turns.turn import CONVERSATION_DELETED, Turn
from apps.core.db import release_connections
from apps.graph_tools.models import WriteApproval
from apps.graph_tools.selectors import approval_result
from apps.projects.selectors import parse_uuid

log = logging.getLogger("kgchat.chat")


@dataclass
class Expired:
    """What a takeover pass found: the turns whose lease lapsed, now this process's; the decided
    approvals whose continuing turn never started; the runs of conversations deleted meanwhile."""

    turns: list[Takeover]
    approvals: list[WriteApproval]
    runs_of_deleted: list[AgentRun]


def expired_take(running: Sequence[uuid.UUID] = ()) -> Expired:
    """The turns whose lease lapsed, now this process's (but those in ``running``, this process's
    live turns); the decided approvals whose continuing turn never started (to start here); the
    runs of deleted conversations, each now this process's (to end here)."""
    try:
        deleted = [run for run in runs_of_deleted_conversations() if agent_run_take_over(run=run)]
        return Expired(turns_expired_take(running=running), decided_approvals_never_continued(), deleted)
    finally:
        release_connections()


async def runs_of_deleted_end(runs: Sequence[AgentRun]) -> None:
    """End the runs of conversations deleted while no process ran them, as the deletion of a
    running turn ends its run: cancelled, with what they did (``AgentExecutor.end``)."""
    for run in runs:
        stop = StopSignal()
        stop.stop(CONVERSATION_DELETED)
        try:
            await AgentExecutor().end(run, stop, attempt=run.attempts)
        except Exception:
            log.exception("ending run %s of a deleted conversation failed; tried again later", run.id)


async def taken_over_go(takeover: Takeover, launch: Callable[[Turn], Awaitable[object]]) -> None:
    """Go on with a taken-over turn: an agent turn as its run's next attempt in this process
    (``launch``), resumed or stopped by its ``ending``; else (or when its conversation or agent
    is gone) it ends here with its last frames."""
    if takeover.run is not None and not takeover.closed:
        turn = await sync_to_async(taken_over_turn, thread_sensitive=False)(takeover)
        if turn is not None:
            await launch(turn)
            return
        if takeover.ending is not None:
            stop = StopSignal()
            stop.stop(takeover.ending)
            await AgentExecutor().end(takeover.run, stop, attempt=takeover.run.attempts)
    await taken_over_end(takeover)


def taken_over_turn(takeover: Takeover) -> Turn | None:
    """The ``Turn`` a taken-over agent turn goes on as (its run's next attempt); None when its
    conversation or agent is gone (the turn then ends)."""
    try:
        run = takeover.run
        assert run is not None
        conversation = (
            Conversation.objects.select_related("agent_definition", "project")
            .filter(id=takeover.conversation_id, active_turn_id=takeover.turn_id)
            .first()
        )
        user_message = (
            Message.objects.filter(conversation_id=takeover.conversation_id, role=MessageRole.USER)
            .order_by("-created_at", "-id")
            .first()
        )
        if conversation is None or conversation.agent_definition is None or user_message is None:
            return None
        turn = admission.turn_build(
            turn_id=takeover.turn_id,
            conversation=conversation,
            project=conversation.project,
            definition=conversation.agent_definition,
            user_message=user_message,
            # The history window (the run's stored events hold it, unless it died before its first).
            resume=_decided_call(conversation),
            run_id=run.id,
            graph_version=run.graph_version or 0,
        )
        turn.run, turn.attempt, turn.ending = run, run.attempts, takeover.ending
        # Where the dead process's frames were (its saved mark); a bus that kept its frames
        # (Redis) says it exactly instead (``service._launch``).
        shown = takeover.shown
        turn.seq = int(shown.get("seq") or 0)
        turn.shown_chars = int(shown["chars"]) if "chars" in shown else len(run.final_text)
        turn.completed_calls = {str(c) for c in shown.get("calls") or ()}
        return turn
    finally:
        release_connections()


def _decided_call(conversation: Conversation) -> ToolResume | None:
    """When the taken-over turn continued a decided approval (the conversation's last message is
    the paused answer carrying its call), that call's result: the new message of a run that died
    before storing its first event (``adk_run`` sends it again then; otherwise it is stored)."""
    last = Message.objects.filter(conversation=conversation).order_by("-created_at", "-id").first()
    context = last.retrieval_context if last is not None else None
    if not isinstance(context, dict) or context.get("stop_reason") != "approval_required":
        return None
    approval_id = parse_uuid(context.get("approval_id"))
    approval = WriteApproval.objects.filter(id=approval_id).first() if approval_id else None
    if approval is None or approval.status == "pending":
        return None
    return ToolResume(call_id=approval.call_id, tool=approval.tool_name, result=approval_result(approval))


async def taken_over_end(takeover: Takeover) -> None:
    """Publish the last frames of a taken-over turn that ends without going on (closed already),
    and release its claim."""
    bus = get_bus()
    key = str(takeover.conversation_id)
    resumed = await bus.resume(key, str(takeover.turn_id))
    frames: dict[str, ErrorFrame] = {
        "cancelled": ErrorFrame(error="the run was cancelled", code="cancelled"),
        "failed": ErrorFrame(
            error="the server process running this turn stopped too often; it was not resumed again",
            code="turn_failed_repeatedly",
        ),
        "interrupted": ErrorFrame(
            error="the server process running this turn stopped; the answer so far is kept",
            code="interrupted",
        ),
        "resume": ErrorFrame(error="the conversation or its agent is gone", code="interrupted"),
    }
    run_id = str(takeover.run.id) if takeover.run is not None else None
    # After the frames the dead process published: as the bus kept them, or as it saved its mark.
    seq = resumed.seq or int(takeover.shown.get("seq") or 0)
    try:
        ending = takeover.ending
        frame = ErrorFrame(error=ending.message, code=ending.code) if ending else frames[takeover.outcome]
        frame.seq = seq + 1
        await bus.publish(key, frame)
        await bus.publish(key, DoneFrame(messageId=None, runId=run_id, seq=seq + 2))
    finally:
        await bus.finish(key)
    if takeover.outcome != "interrupted" and not takeover.closed:
        await sync_to_async(claim_release)(takeover.conversation_id, takeover.turn_id)

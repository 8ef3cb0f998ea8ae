"""The turn service: one user message becomes a streamed, persisted turn, for every transport.

``turn_start`` validates the request, resolves or creates the conversation, persists the user
message and claims the conversation, all before anything streams (so a bad request answers
400 and leaves nothing behind). The turn then runs as its own task and publishes typed frames
to the frame bus; transports subscribe to the bus and only translate frames to their medium.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from datetime import timedelta
from functools import partial
from typing import Any, cast

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.db import IntegrityError
from django.db.models import Case, F, Field, Model, Q, Value, When
from django.db.models.expressions import RawSQL
from django.utils import timezone

from apps.agents.events import StopReason, StopSignal
from apps.agents.plain import Provider
from apps.agents.services import (
    agent_run_abandon,
)
from apps.chat import selectors
from apps.chat.models import Conversation, Message, MessageRole
from apps.chat.streams.bus import get_bus
from apps.chat.streams.frames import DoneFrame, ErrorFrame, MetaFrame, TurnStartedFrame
from apps.chat.turns import admission, limits, recovery
from apps.chat.turns.agent_turn import run_agent_turn
from apps.chat.turns.approval_events import (
    approval_expiry_arm,
    approvals_announce,
)
from apps.chat.turns.claim import (
    RELEASED,
    claim_cancel_ask,
    claim_release_retrying,
    claim_renew,
    lease_seconds,
    turn_progress_save,
)
from apps.chat.turns.plain_turn import run_plain_turn
from apps.chat.turns.turn import Answer, ConversationDeleted, Turn, TurnHandle, TurnProgress, emit
from apps.core.db import (
    ConnectionReleasingExecutor,
    release_connections,
    rows_write,
)
from apps.core.failures import error_classify
from apps.core.inputs import storable
from apps.core.timeouts import call_later_bare
from apps.graph_tools.models import WriteApproval
from apps.projects.selectors import Principal, parse_uuid

log = logging.getLogger("kgchat.chat")


_tasks: set[asyncio.Task[None]] = set()
# The turns this process runs now, by id: never taken over by this same process (``turns_take_over``).
_running: set[uuid.UUID] = set()


async def turn_start(
    *,
    principal: Principal,
    message: object,
    project_id: object = None,
    conversation_id: object = None,
    agent_definition_id: object = None,
    provider: Provider | None = None,
) -> TurnHandle:
    """Validate and persist the user's message, then run the turn as a task publishing frames.

    Raises ``ServiceError`` (400 invalid request or unknown agent definition, 404 conversation or
    project, 409 turn in progress or disabled agent definition) before anything is persisted or streamed;
    any other failure (a busy database among them) is the transport's ``error_classify``'s to name.
    """
    text = limits.message_validate(message)
    await recover_once()
    if conversation_id and not parse_uuid(conversation_id):
        raise selectors.ConversationNotFound()
    admit = sync_to_async(
        admission.turn_admit, thread_sensitive=False, executor=admission.admission_executor()
    )
    turn, expired = await admit(
        principal=principal,
        message=text,
        project_id=project_id,
        conversation_id=conversation_id,
        agent_definition_id=agent_definition_id,
    )
    await approvals_announce(expired)
    return await _launch(turn, provider)


async def _launch(turn: Turn, provider: Provider | None) -> TurnHandle:
    """Open an admitted turn on the bus and run it as its own task (a taken-over turn goes on
    after the frames its dead process published)."""
    conversation_key = str(turn.conversation.id)
    if turn.attempt > 1:
        resumed = await turn.bus.resume(conversation_key, str(turn.turn_id))
        if resumed.seq:
            # The bus kept the dead process's frames (Redis): exactly what its clients were sent.
            turn.seq, turn.shown_chars = resumed.seq, len(resumed.shown)
            turn.completed_calls = set(resumed.completed)
        # Otherwise they died with it: the turn goes on after the mark it saved (``taken_over_turn``).
    else:
        await turn.bus.begin(conversation_key, str(turn.turn_id))
    turn.stop = StopSignal(turn.bus.cancel_signal(conversation_key), explain=turn.explain_stop)
    if turn.ending is not None:
        turn.stop.stop(turn.ending)
    turn.progress = TurnProgress(turn, partial(turn_progress_save, turn))
    task = asyncio.create_task(_run_turn(turn, provider), name=f"turn {turn.turn_id}")
    _tasks.add(task)
    _running.add(turn.turn_id)
    task.add_done_callback(_tasks.discard)
    task.add_done_callback(lambda _: _running.discard(turn.turn_id))
    return TurnHandle(
        conversation_id=conversation_key, turn_id=str(turn.turn_id), user_message_id=str(turn.user_message.id)
    )


async def turn_resume(*, approval: WriteApproval, provider: Provider | None = None) -> TurnHandle | None:
    """Continue the turn that stopped for ``approval`` (decided): a new turn of its conversation,
    in this process, whose agent reads the stored history and the decided call's result."""
    turn = await sync_to_async(admission.turn_admit_resumed)(approval)
    if turn is None:
        return None
    return await _launch(turn, provider)


async def turn_cancel(*, principal: Principal, conversation_id: object) -> bool:
    """Ask the running turn of one of my conversations to stop; False when none runs.

    Recorded on the claim too: a turn whose process died meanwhile is ended, not resumed."""
    conversation = await selectors.aconversation_get(principal=principal, conversation_id=conversation_id)
    asked = await sync_to_async(claim_cancel_ask)(conversation.id)
    return await get_bus().cancel(str(conversation.id)) or asked


async def turn_opened(conversation_id: str, turn_id: str) -> bool:
    """Wait until the turn holding a conversation's claim can be followed from this process: one
    whose process died is, once a process took it over (with one process and no Redis, this one:
    within the lease, at once after a restart on the same host). False if it did not come."""
    return await get_bus().opened(conversation_id, turn_id, within=3 * lease_seconds())


async def turn_wait_all() -> None:
    """Wait for every turn task of this process (tests, graceful shutdown)."""
    while _tasks:
        await asyncio.gather(*list(_tasks), return_exceptions=True)


async def _run_turn(turn: Turn, provider: Provider | None) -> None:
    """Run a started turn to its end: meta, the branch's frames, then ``done``.

    The conversation is released before ``done`` is published, so a client may send its next
    message the moment it sees ``done``; the bus then marks the turn over.
    """
    timeout = settings.KGCHAT_TURN_TIMEOUT_SECONDS
    watchdog = call_later_bare(
        timeout,
        turn.stop.stop,
        StopReason(code="timeout", message=f"the turn took longer than {timeout} s and was stopped"),
    )
    # The turn's database calls run on a thread of its own that gives its pooled connection back
    # after each call: a turn waiting on the model holds no connection.
    executor = ConnectionReleasingExecutor(name=f"turn-{turn.turn_id}")
    heartbeat = asyncio.create_task(_heartbeat(turn), name=f"lease {turn.turn_id}")
    try:
        async with ThreadSensitiveContext(executor=executor):
            await _run_turn_body(turn, provider)
    finally:
        heartbeat.cancel()
        watchdog.cancel()
        if turn.progress is not None:
            await turn.progress.close()
        executor.shutdown(wait=False)


def _renew(turn: Turn) -> tuple[str, bool]:
    try:
        return claim_renew(turn.conversation.id, turn.turn_id)
    finally:
        release_connections()


async def _heartbeat(turn: Turn) -> None:
    """Renew the turn's lease every third of ``KGCHAT_TURN_LEASE_SECONDS`` until the turn ends.

    On a thread of the default pool, not the turn's own: a long database call of the turn must
    not delay the renewal. A cancel recorded on the claim, or a deleted conversation, stops the
    turn; a claim taken over by another process (which took this one for dead) stops it without
    another word from this one."""
    every = lease_seconds() / 3
    while True:
        await asyncio.sleep(every)
        try:
            holder, cancelled = await sync_to_async(_renew, thread_sensitive=False)(turn)
        except Exception:
            log.warning("turn %s: renewing its lease failed", turn.turn_id, exc_info=True)
            continue
        if holder == "released":
            return
        if holder == "taken":
            turn.lease_lost = True
        if holder != "held" or cancelled:
            turn.stop.stop()  # a deletion explains itself (``Turn.explain_stop``)
        if holder != "held":
            return


async def _run_turn_body(turn: Turn, provider: Provider | None) -> DoneFrame:
    """The turn from ``meta`` to ``done``, whatever ends it; the same for a turn taken over from
    a dead process (``turn.attempt`` > 1), whose followers had ``meta`` (and the start) from it."""
    conversation_key = turn.key
    run_id = str(turn.run_id) if turn.run_id else None
    done = DoneFrame(messageId=None, runId=run_id)
    try:
        if turn.attempt == 1:
            meta = MetaFrame(
                conversationId=conversation_key,
                messageId=str(turn.user_message.id),
                agentDefinitionId=str(turn.agent_definition.id) if turn.agent_definition else None,
                runId=run_id,
                model=turn.model,
            )
            await emit(turn, meta)
            if turn.resume is None:
                await _turn_started_announce(turn)
        done = await _branch_run(turn, provider, done)
    except LeaseLost:
        log.warning("turn %s: another process took it over; this one stops", turn.turn_id)
        turn.released = True  # not ours to release any more
    except ConversationDeleted:
        if not turn.deleted:
            turn.deleted = True
            await emit(turn, ErrorFrame(error="the conversation was deleted", code="conversation_deleted"))
        done = DoneFrame(messageId=None, runId=run_id)
    except Exception as exc:
        failure = error_classify(exc, where=f"turn {turn.turn_id} of conversation {conversation_key}")
        await emit(turn, ErrorFrame(error=failure.message, code=failure.code))
        done = DoneFrame(messageId=None, runId=run_id)
    finally:
        if turn.lease_lost:
            await turn.bus.abandon(conversation_key)
            return done  # noqa: B012 - the turn is another process's now: nothing more from here
        if turn.run is not None and not turn.run_taken:
            with contextlib.suppress(Exception):
                await agent_run_abandon(run_id=turn.run.id, error="the turn failed before its agent ran")
        if not turn.released:
            await claim_release_retrying(turn)
        try:
            await emit(turn, done)
        finally:
            await turn.bus.finish(conversation_key)
    return done


async def _branch_run(turn: Turn, provider: Provider | None, done: DoneFrame) -> DoneFrame:
    """Run the turn's branch and store its answer; the ``done`` frame that ends it."""
    branch = run_agent_turn if turn.agent_definition is not None else run_plain_turn
    answer = await branch(turn, provider)
    if turn.lease_lost:
        raise LeaseLost()
    if answer is None:
        return done
    message = await _answer_persist(turn, answer)
    if answer.retrieval_context.get("stop_reason") == "approval_required":
        approval_expiry_arm(turn.conversation.id)
    return DoneFrame(messageId=str(message.id), runId=done.runId, citations=answer.citations)


class LeaseLost(Exception):
    """The turn's claim moved to another process (this one was taken for dead): it stops silently."""


def _runner(provider: Provider | None) -> recovery.TurnRunner:
    """How a turn runs here, for the takeover of turns whose process died (``recovery``)."""
    return recovery.TurnRunner(
        launch=partial(_launch, provider=provider),
        resume=partial(_resume, provider=provider),
        running=_running,
    )


async def _resume(approval: WriteApproval, *, provider: Provider | None) -> TurnHandle | None:
    return await turn_resume(approval=approval, provider=provider)


async def turns_take_over(provider: Provider | None = None) -> int:
    """Take over the turns whose lease lapsed, going on with them in this process
    (``recovery.turns_take_over``); how many turns were taken."""
    return await recovery.turns_take_over(_runner(provider))


async def recover_once() -> None:
    """Before this process serves anything: close dead processes' batch runs (once), and start
    taking over the chat turns whose lease lapses (``recovery.recover_once``)."""
    await recovery.recover_once(_runner(None))


async def _turn_started_announce(turn: Turn) -> None:
    """Tell the other sockets showing the conversation that a new message started this turn (they
    follow it). From the turn's task, once ``meta`` is on the bus: the socket that sent the message
    has registered it by then (``ChatConsumer.on_message``) and skips the event. Watchers are a
    convenience: a failure to reach them is logged, and the turn goes on."""
    message = turn.user_message
    event = TurnStartedFrame(
        conversationId=turn.key,
        messageId=str(message.id),
        content=message.content,
        createdAt=message.created_at,
    )
    try:
        await turn.bus.announce(turn.key, event)
    except Exception:
        log.warning(
            "turn %s: could not announce it to the conversation's watchers", turn.turn_id, exc_info=True
        )


async def _answer_persist(turn: Turn, answer: Answer) -> Message:
    """Store the turn's tool rows and answer in one statement, with what the turn learnt (and a
    plain answer's record of its model call, ``Answer.run``).

    The same transaction merges the entities tools returned into the conversation's known
    entities and releases the conversation, so the next message may follow ``done`` at once.
    Raises ``ConversationDeleted`` (nothing written) when the conversation is gone.
    """
    if turn.deleted:
        raise ConversationDeleted()

    @sync_to_async
    def write() -> Message:
        now = timezone.now()
        for offset, row in enumerate(answer.extra):
            row.created_at = now + timedelta(microseconds=offset)
            # What the model wrote or passed to a tool may hold NUL or lone surrogates.
            row.content, row.tool_calls = storable(row.content), storable(row.tool_calls)
        message = answer.answer_row or Message(
            conversation=turn.conversation,
            role=MessageRole.ASSISTANT,
            content=storable(answer.content),
            retrieval_context=answer.retrieval_context,
            citations=[c.model_dump() for c in answer.citations],
            created_at=now + timedelta(microseconds=len(answer.extra)),
        )
        rows: list[Model] = [answer.run] if answer.run is not None else []  # a plain answer's record
        rows += answer.extra if answer.answer_row is not None else [*answer.extra, message]
        # One statement: the rows, what the turn learnt and the release (``claim_release``'s condition).
        held = Q(active_turn_id=turn.turn_id)
        learnt: dict[str, object] = {
            "updated_at": timezone.now(),
            "known_entities": RawSQL("known_entities || %s::jsonb", [json.dumps(turn.known.new)]),
        }
        for name, cleared in RELEASED.items():
            field = cast("Field[Any, Any]", Conversation._meta.get_field(name))
            learnt[name] = Case(
                When(held, then=Value(cleared, output_field=field)), default=F(name), output_field=field
            )
        rows_write(inserts=rows, updates=[(Conversation.objects.filter(id=turn.conversation.id), learnt)])
        return message

    try:
        message = await write()
    except IntegrityError:
        # Deleted between the cancel check and this write: its rows may no longer refer to it.
        if await Conversation.objects.filter(id=turn.conversation.id).aexists():
            raise
        raise ConversationDeleted() from None
    turn.released = True
    return message

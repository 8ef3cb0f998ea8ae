"""The turn service: one user message becomes a streamed, persisted turn, for every transport.

``turn_start`` validates the request, resolves or creates the conversation, persists the user
message and claims the conversation, all before anything streams (so a bad request answers
400 and leaves nothing behind). The turn then runs as its own task and publishes typed frames
to the frame bus; transports subscribe to the bus and only translate frames to their medium.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from functools import partial
from typing import Any, cast

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import Case, F, Field, Model, Q, Value, When
from django.db.models.expressions import RawSQL
from django.utils import timezone

from apps.agents.events import StopReason, StopSignal, ToolResume
from apps.agents.llm.base import Provider
from apps.agents.models import AgentRun
from apps.agents.services import (
    STALE_AFTER,
    agent_run_abandon,
    agent_run_new,
    agent_run_save_text,
    agent_runs_interrupt_orphaned,
    worker_is_dead,
    worker_name,
)
from apps.chat import admission, selectors
from apps.chat.agent_turn import run_agent_turn
from apps.chat.bus import get_bus
from apps.chat.frames import ApprovalDecidedFrame, DoneFrame, ErrorFrame, MetaFrame, TurnStartedFrame
from apps.chat.models import Conversation, Message, MessageRole
from apps.chat.plain_turn import run_plain_turn
from apps.chat.turn import Answer, ConversationDeleted, Turn, TurnHandle, emit
from apps.core.db import (
    ConnectionReleasingExecutor,
    is_database_busy,
    raise_if_busy,
    release_connections,
    rows_write,
)
from apps.core.errors import ServiceError
from apps.core.failures import error_classify
from apps.core.inputs import storable
from apps.graph_tools.models import ApprovalStatus, WriteApproval
from apps.graph_tools.selectors import approval_result, approvals_of_conversation
from apps.graph_tools.services import approvals_expire
from apps.projects.selectors import Principal, parse_uuid

log = logging.getLogger("kgchat.chat")


class TurnInProgress(ServiceError):
    """a turn is already running in this conversation"""

    status = 409
    code = "turn_in_progress"


# --- conversations ---------------------------------------------------------------------------


def conversation_rename(*, principal: Principal, conversation_id: object, title: str) -> Conversation:
    conversation = selectors.conversation_get(principal=principal, conversation_id=conversation_id)
    title = (title or "").strip()
    if not title or len(title) > 200:
        raise admission.InvalidMessage("title must be 1 to 200 characters")
    Conversation.objects.filter(id=conversation.id).update(title=title, updated_at=timezone.now())
    conversation.refresh_from_db()
    return conversation


def _delete(conversation_id: uuid.UUID) -> bool:
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(id=conversation_id)
        running = conversation.active_turn_id is not None
        conversation.delete()
    return running


async def conversation_delete(*, principal: Principal, conversation_id: object) -> None:
    """Delete one of my conversations with its messages, at once, even while a turn runs in it.

    The running turn (in whichever process) is cancelled: it ends with an ``error`` frame of code
    ``conversation_deleted`` and ``done``, stores nothing, and its run is ``cancelled``.
    """
    conversation = await selectors.aconversation_get(principal=principal, conversation_id=conversation_id)
    if await sync_to_async(_delete)(conversation.id):
        await get_bus().cancel(str(conversation.id))


# --- the conversation's claim: one turn at a time -----------------------------------------------


def _claim(conversation_id: uuid.UUID, turn_id: uuid.UUID) -> bool:
    """Claim the conversation for ``turn_id``: free, or held by a turn older than ``STALE_AFTER``."""
    return _claim_reading_approvals(conversation_id, turn_id) is not None


def _claim_reading_approvals(conversation_id: uuid.UUID, turn_id: uuid.UUID) -> bool | None:
    """Claim the conversation for ``turn_id`` (free, or held by a turn older than ``STALE_AFTER``),
    answering in the same statement whether it has ever had a write approval: None when the claim
    failed, else that answer. The one place the claim's condition is written."""
    now = timezone.now()
    conversations = connection.ops.quote_name(Conversation._meta.db_table)
    approvals = connection.ops.quote_name(WriteApproval._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""UPDATE {conversations}
                SET active_turn_id = %s, active_turn_started_at = %s, active_turn_worker = %s,
                    active_turn_text = '', updated_at = %s
                WHERE id = %s AND (active_turn_id IS NULL OR active_turn_started_at < %s)
                RETURNING EXISTS (SELECT 1 FROM {approvals} WHERE conversation_id = %s)""",
            [turn_id, now, worker_name(), now, conversation_id, now - STALE_AFTER, conversation_id],
        )
        row = cursor.fetchone()
    return None if row is None else bool(row[0])


def _release(conversation_id: uuid.UUID, turn_id: uuid.UUID) -> None:
    """Give the conversation back, if ``turn_id`` still holds it (the only place a claim ends)."""
    Conversation.objects.filter(id=conversation_id, active_turn_id=turn_id).update(**RELEASED)


# The claim's columns once released (what ``_release`` sets).
RELEASED = {
    "active_turn_id": None,
    "active_turn_started_at": None,
    "active_turn_worker": "",
    "active_turn_text": "",
}

# How often a turn tries to give its conversation back when the database is busy.
RELEASE_ATTEMPTS = 3


async def _release_claim(turn: Turn) -> None:
    """Release the conversation's claim, retrying while the database is busy.

    A claim left behind would refuse every message of the conversation (409) until it goes stale.
    """
    for attempt in range(1, RELEASE_ATTEMPTS + 1):
        try:
            await sync_to_async(_release)(turn.conversation.id, turn.turn_id)
            turn.released = True
            return
        except Exception as exc:
            if is_database_busy(exc) and attempt < RELEASE_ATTEMPTS:
                continue
            log.exception("releasing conversation %s failed; the claim expires on its own", turn.key)
            return


async def _save_text(turn: Turn, text: str) -> None:
    """Keep what the turn has streamed so far: on its agent run, or on a plain turn's claim."""
    if turn.run_id is not None:
        await agent_run_save_text(run_id=turn.run_id, text=text)
    else:
        await Conversation.objects.filter(id=turn.conversation.id, active_turn_id=turn.turn_id).aupdate(
            active_turn_text=text
        )


def _reclaim_dead(conversation_id: uuid.UUID, turn_id: uuid.UUID) -> None:
    """Release a dead process's claim; a plain turn's saved text becomes the interrupted answer."""
    conversation = (
        Conversation.objects.select_for_update(skip_locked=True)
        .filter(id=conversation_id, active_turn_id=turn_id)
        .first()
    )
    if conversation is None:  # released meanwhile, or another process is recovering it
        return
    if conversation.active_turn_text:
        Message.objects.create(
            conversation_id=conversation.id,
            role=MessageRole.ASSISTANT,
            content=conversation.active_turn_text,
            retrieval_context={"strategy": "always_retrieve", "stop_reason": "interrupted"},
        )
    _release(conversation.id, turn_id)


# Admission runs on a few threads of its own. With Channels every websocket consumer's
# thread-sensitive calls share one thread (no ``ThreadSensitiveContext`` per connection), so turns
# sent together were admitted one after the other; each admission gives its connection back when
# it ends, so these threads hold none in between.
ADMISSION_THREADS = 4
_admission_pool = ThreadPoolExecutor(max_workers=ADMISSION_THREADS, thread_name_prefix="kgchat-admission")


def _admission_pool_renew() -> None:
    """A forked child (a test's live server, a preforking server) inherits the pool's bookkeeping
    but not its threads: the pool would count them as running and queue every admission forever."""
    global _admission_pool
    _admission_pool = ThreadPoolExecutor(max_workers=ADMISSION_THREADS, thread_name_prefix="kgchat-admission")


os.register_at_fork(after_in_child=_admission_pool_renew)


def _prepare(
    *,
    principal: Principal,
    message: str,
    project_id: object,
    conversation_id: object,
    agent_definition_id: object,
) -> tuple[Turn, list[ApprovalDecidedFrame]]:
    """Admit the message and claim its conversation in one transaction; the ``Turn`` to run and
    the events of the approvals this closed as expired (to announce once committed).

    Round trips: a new conversation reads its project, definition and the sender's rate (one
    query), then inserts the conversation, the user message and the run while reading the graph
    version (one statement, atomic without a transaction). A follow-up, in a transaction, reads the
    conversation (one query), claims it, reads its history window and inserts its rows while
    reading the graph version and the rate. A refused turn (rate, claim, approvals) creates nothing."""
    try:
        turn_id = uuid.uuid4()
        # A new conversation's rows go in one statement after plain reads: no transaction needed.
        with transaction.atomic() if conversation_id else contextlib.nullcontext():
            conversation, project, definition, created = admission.conversation_for_turn(
                principal=principal,
                message=message,
                project_id=project_id,
                conversation_id=conversation_id,
                agent_definition_id=agent_definition_id,
                turn_id=turn_id,
            )
            expired: list[WriteApproval] = []
            if not created:
                has_approvals = _claim_reading_approvals(conversation.id, turn_id)
                if has_approvals is None:
                    raise TurnInProgress(
                        "a turn is already running in this conversation; wait for it or cancel it"
                    )
                # Only a conversation that ever had an approval has one to settle or wait for.
                if has_approvals:
                    expired = _approvals_settle(conversation.id)
            user_message = Message(conversation=conversation, role=MessageRole.USER, content=message)
            turn = admission.turn_build(
                turn_id=turn_id,
                conversation=conversation,
                project=project,
                definition=definition,
                user_message=user_message,
                new_conversation=created,
                graph_version=0,  # read below, with the rows
            )
            rows: list[Model] = [conversation, user_message] if created else [user_message]
            if turn.run_id is not None and definition is not None:
                # Opened with the turn's other rows: the executor reaches the model without a write.
                turn.run = agent_run_new(
                    project_id=project.id,
                    agent_definition_id=definition.pk,
                    conversation_id=conversation.id,
                    model=turn.model,
                    run_id=turn.run_id,
                    graph_version=admission.graph_version_value(project.id),
                )
                rows.append(turn.run)
            version, recent = rows_write(
                inserts=rows,
                reads=[
                    admission.graph_version_query(project.id),
                    None if created else admission.rate_count(principal),
                ],
            )
            admission.rate_enforce(recent)  # a follow-up's: its claim and rows roll back
            turn.graph_version = int(version or 0)
            if turn.run is not None:
                turn.run.graph_version = turn.graph_version
        return turn, [approval_event(approval) for approval in expired]
    except DatabaseError as exc:
        raise_if_busy(exc)
        raise
    finally:
        # The request that started the turn may stream its frames for minutes: it must not keep
        # a pooled connection meanwhile.
        release_connections()


# --- starting a turn -------------------------------------------------------------------------

_tasks: set[asyncio.Task[None]] = set()


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
    project, 409 turn in progress or disabled agent definition) before anything is persisted or streamed.
    """
    text = admission.message_validate(message)
    try:
        await recover_once()
    except DatabaseError as exc:
        raise_if_busy(exc)
        raise
    if conversation_id and not parse_uuid(conversation_id):
        raise selectors.ConversationNotFound()
    prepare = sync_to_async(_prepare, thread_sensitive=False, executor=_admission_pool)
    turn, expired = await prepare(
        principal=principal,
        message=text,
        project_id=project_id,
        conversation_id=conversation_id,
        agent_definition_id=agent_definition_id,
    )
    await approvals_announce(expired)
    return await _launch(turn, provider)


async def _launch(turn: Turn, provider: Provider | None) -> TurnHandle:
    """Open an admitted turn on the bus and run it as its own task."""
    conversation_key = str(turn.conversation.id)
    await turn.bus.begin(conversation_key, str(turn.turn_id))
    turn.stop = StopSignal(turn.bus.cancel_signal(conversation_key), explain=turn.explain_stop)
    turn.save_text = partial(_save_text, turn)
    task = asyncio.create_task(_run_turn(turn, provider), name=f"turn {turn.turn_id}")
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return TurnHandle(
        conversation_id=conversation_key, turn_id=str(turn.turn_id), user_message_id=str(turn.user_message.id)
    )


# --- a turn that waits for approval, and its continuation -------------------------------------


class ApprovalWaiting(ServiceError):
    """a proposed graph change in this conversation waits for a decision"""

    status = 409
    code = "approval_pending"


def _approvals_settle(conversation_id: uuid.UUID) -> list[WriteApproval]:
    """Close the waiting calls of this conversation's expired approvals (once each) and return
    them, and refuse a new turn while one is still pending: ``ApprovalWaiting``. Call it inside
    the admission transaction.

    An expired call gets its tool row (the model will read that nothing was written) and an empty
    assistant message with the stop reason ``approval_expired``, which ends the paused turn.
    """
    approvals_expire()
    closed: list[WriteApproval] = []
    for approval in approvals_of_conversation(conversation_id=conversation_id):
        if approval.status == ApprovalStatus.PENDING:
            raise ApprovalWaiting(
                "a proposed graph change waits for a decision: approve or reject it first "
                f"(it expires at {approval.expires_at.isoformat()})"
            )
        ended = Message.objects.filter(
            conversation_id=conversation_id, retrieval_context__approval_id=str(approval.id)
        ).exclude(retrieval_context__stop_reason="approval_required")
        if approval.status != ApprovalStatus.EXPIRED or ended.exists():
            continue
        now = timezone.now()
        result = approval_result(approval)
        Message.objects.create(
            conversation_id=conversation_id,
            role=MessageRole.TOOL,
            content=json.dumps(result, ensure_ascii=False),
            tool_calls=[
                {
                    "id": approval.call_id,
                    "name": approval.tool_name,
                    "output": result,
                    "error": result["error"],
                }
            ],
            created_at=now,
        )
        Message.objects.create(
            conversation_id=conversation_id,
            role=MessageRole.ASSISTANT,
            content="",
            retrieval_context={
                "agent_run_id": str(approval.run_id) if approval.run_id else None,
                "stop_reason": "approval_expired",
                "approval_id": str(approval.id),
            },
            created_at=now + timedelta(microseconds=1),
        )
        closed.append(approval)
    return closed


def approvals_settle(*, conversation_id: uuid.UUID) -> list[ApprovalDecidedFrame]:
    """``_approvals_settle`` in its own transaction (after a decision came too late); the events
    of the approvals it closed as expired, to announce."""
    closed: list[WriteApproval] = []
    with transaction.atomic():
        Conversation.objects.select_for_update().filter(id=conversation_id).first()
        try:
            closed = _approvals_settle(conversation_id)
        except ApprovalWaiting:
            pass
    return [approval_event(approval) for approval in closed]


def approval_event(approval: WriteApproval, *, continued: bool = False) -> ApprovalDecidedFrame:
    """The ``approval_decided`` event of a decided or expired approval (reads who decided)."""
    decided_by = (
        approval.decided_by.get_username() if approval.decided_by_id and approval.decided_by else None
    )
    result = approval_result(approval) if approval.status == ApprovalStatus.EXPIRED else approval.result
    return ApprovalDecidedFrame.model_validate(
        {
            "approvalId": str(approval.id),
            "conversationId": str(approval.conversation_id) if approval.conversation_id else None,
            "callId": approval.call_id,
            "status": approval.status,
            "decidedBy": decided_by,
            "reason": approval.reason,
            "result": result,
            "continued": continued,
        }
    )


async def approvals_announce(events: list[ApprovalDecidedFrame]) -> None:
    """Tell every watcher of each event's conversation (every tab, every process) about it."""
    for event in events:
        if event.conversationId is not None:
            await get_bus().announce(event.conversationId, event)


# A paused turn's approval is closed when it expires, not only when its conversation is next used:
# the process that paused it sets a timer (a plain loop timer, nothing to clean up if the process
# ends first: then the next use or decision closes it, as before).
APPROVAL_EXPIRY_GRACE_SECONDS = 2.0
_expiry_tasks: set[asyncio.Task[None]] = set()


def approval_expiry_arm(conversation_id: uuid.UUID) -> None:
    """Settle and announce the conversation's approvals once the one just proposed has expired."""
    delay = settings.KGCHAT_APPROVAL_TTL_MINUTES * 60 + APPROVAL_EXPIRY_GRACE_SECONDS

    def fire() -> None:
        task = asyncio.ensure_future(_approvals_expired(conversation_id))
        _expiry_tasks.add(task)
        task.add_done_callback(_expiry_tasks.discard)

    # A fresh context: the turn's own (its thread-sensitive executor) has ended by then.
    asyncio.get_running_loop().call_later(delay, fire, context=contextvars.Context())


@sync_to_async
def _approvals_settle_now(conversation_id: uuid.UUID) -> list[ApprovalDecidedFrame]:
    try:
        return approvals_settle(conversation_id=conversation_id)
    finally:
        release_connections()


async def _approvals_expired(conversation_id: uuid.UUID) -> None:
    try:
        await approvals_announce(await _approvals_settle_now(conversation_id))
    except Exception:
        log.exception("closing the expired approvals of conversation %s failed", conversation_id)


@sync_to_async
def _prepare_resume(approval: WriteApproval) -> Turn | None:
    """Claim the conversation of a decided approval for the turn that continues it; None when the
    conversation or its agent is gone (the decision stands, nothing continues)."""
    if approval.conversation_id is None:
        return None
    try:
        turn_id = uuid.uuid4()
        with transaction.atomic():
            conversation = (
                Conversation.objects.select_related("agent_definition", "project")
                .filter(id=approval.conversation_id)
                .first()
            )
            if conversation is None or conversation.agent_definition is None:
                return None
            user_message = (
                Message.objects.filter(conversation=conversation, role=MessageRole.USER)
                .order_by("-created_at", "-id")
                .first()
            )
            if user_message is None:
                return None
            if not _claim(conversation.id, turn_id):
                raise TurnInProgress(
                    "a turn is already running in this conversation; wait for it or cancel it"
                )
        return admission.turn_build(
            turn_id=turn_id,
            conversation=conversation,
            project=conversation.project,
            definition=conversation.agent_definition,
            user_message=user_message,
            resume=ToolResume(
                call_id=approval.call_id, tool=approval.tool_name, result=approval_result(approval)
            ),
        )
    finally:
        release_connections()


async def turn_resume(*, approval: WriteApproval, provider: Provider | None = None) -> TurnHandle | None:
    """Continue the turn that stopped for ``approval`` (decided): a new turn of its conversation,
    in this process, whose agent reads the stored history and the decided call's result."""
    turn = await _prepare_resume(approval)
    if turn is None:
        return None
    return await _launch(turn, provider)


async def turn_cancel(*, principal: Principal, conversation_id: object) -> bool:
    """Ask the running turn of one of my conversations to stop; False when none runs."""
    conversation = await selectors.aconversation_get(principal=principal, conversation_id=conversation_id)
    return await get_bus().cancel(str(conversation.id))


async def turn_wait_all() -> None:
    """Wait for every turn task of this process (tests, graceful shutdown)."""
    while _tasks:
        await asyncio.gather(*list(_tasks), return_exceptions=True)


# --- running a turn --------------------------------------------------------------------------


async def _run_turn(turn: Turn, provider: Provider | None) -> None:
    """Run a started turn to its end: meta, the branch's frames, then ``done``.

    The conversation is released before ``done`` is published, so a client may send its next
    message the moment it sees ``done``; the bus then marks the turn over.
    """
    timeout = settings.KGCHAT_TURN_TIMEOUT_SECONDS
    watchdog = asyncio.get_running_loop().call_later(
        timeout,
        turn.stop.stop,
        StopReason(code="timeout", message=f"the turn took longer than {timeout} s and was stopped"),
    )
    # The turn's database calls run on a thread of its own that gives its pooled connection back
    # after each call: a turn waiting on the model holds no connection.
    executor = ConnectionReleasingExecutor(name=f"turn-{turn.turn_id}")
    try:
        async with ThreadSensitiveContext(executor=executor):
            await _run_turn_body(turn, provider)
    finally:
        watchdog.cancel()
        executor.shutdown(wait=False)


async def _run_turn_body(turn: Turn, provider: Provider | None) -> DoneFrame:
    conversation_key = turn.key
    run_id = str(turn.run_id) if turn.run_id else None
    done = DoneFrame(messageId=None, runId=run_id)
    try:
        await emit(
            turn,
            MetaFrame(
                conversationId=conversation_key,
                messageId=str(turn.user_message.id),
                agentDefinitionId=str(turn.agent_definition.id) if turn.agent_definition else None,
                runId=run_id,
                model=turn.model,
            ),
        )
        if turn.resume is None:
            await _turn_started_announce(turn)
        branch = run_agent_turn if turn.agent_definition is not None else run_plain_turn
        answer = await branch(turn, provider)
        if answer is not None:
            message = await _answer_persist(turn, answer)
            done = DoneFrame(messageId=str(message.id), runId=run_id, citations=answer.citations)
            if answer.retrieval_context.get("stop_reason") == "approval_required":
                approval_expiry_arm(turn.conversation.id)
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
        if turn.run is not None and not turn.run_taken:
            with contextlib.suppress(Exception):
                await agent_run_abandon(run_id=turn.run.id, error="the turn failed before its agent ran")
        if not turn.released:
            await _release_claim(turn)
        try:
            await emit(turn, done)
        finally:
            await turn.bus.finish(conversation_key)
    return done


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
    """Store the turn's tool rows and answer in one statement, with what the turn learnt.

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
        rows = [*answer.extra] if answer.answer_row is not None else [*answer.extra, message]
        # One statement: the rows, what the turn learnt and the release (``_release``'s condition).
        held = Q(active_turn_id=turn.turn_id)
        learnt: dict[str, object] = {
            "updated_at": timezone.now(),
            "known_entities": RawSQL("known_entities || %s::jsonb", [json.dumps(turn.known.new)]),
        }
        for name, cleared in RELEASED.items():
            field = cast("Field[Any, Any]", Conversation._meta.get_field(name))
            learnt[name] = Case(When(held, then=Value(cleared)), default=F(name), output_field=field)
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


# --- crash recovery --------------------------------------------------------------------------


def _keep_interrupted_answer(run: AgentRun) -> None:
    """The partial text of an interrupted agent run becomes its conversation's answer (once)."""
    if run.conversation_id is None or not run.final_text:
        return
    answered = Message.objects.filter(
        conversation_id=run.conversation_id, retrieval_context__agent_run_id=str(run.id)
    ).exists()
    if not answered:
        Message.objects.create(
            conversation_id=run.conversation_id,
            role=MessageRole.ASSISTANT,
            content=run.final_text,
            retrieval_context={"agent_run_id": str(run.id), "stop_reason": "interrupted"},
        )


def interrupted_turns_recover() -> int:
    """Close the runs and conversation claims of dead processes; return how many runs were closed.

    A process is dead when it ran on this host and its pid is gone (or belongs to a newer
    process); elsewhere when its work is older than ``STALE_AFTER``. The partial answer a turn
    had streamed (saved on its run, or on the claim for a plain turn) is kept as the
    conversation's answer with the stop reason ``interrupted``, so nothing the user saw is lost.
    Safe when several processes start together: every row is recovered under a lock the others skip.
    """
    closed = agent_runs_interrupt_orphaned(on_interrupted=_keep_interrupted_answer)
    claims = Conversation.objects.filter(active_turn_id__isnull=False).values_list(
        "id", "active_turn_id", "active_turn_worker", "active_turn_started_at"
    )
    for conversation_id, turn_id, claimed_by, claimed_at in list(claims):
        if turn_id is not None and worker_is_dead(claimed_by, claimed_at):
            with transaction.atomic():
                _reclaim_dead(conversation_id, turn_id)
    if closed:
        log.warning("marked %d agent runs of stopped processes as interrupted", closed)
    return closed


_recovered = False
_recovery_lock = threading.Lock()


def _recover_once_sync() -> None:
    global _recovered
    try:
        with _recovery_lock:
            if not _recovered:
                interrupted_turns_recover()
                _recovered = True
    finally:
        release_connections()


async def recover_once() -> None:
    """Recover turns orphaned by dead processes, once per process, before it serves anything.

    Requests arriving meanwhile wait for it (so a page already shows the interrupted answer);
    a failed attempt (the database is down) is tried again by the next request.
    """
    if not _recovered:
        await sync_to_async(_recover_once_sync)()

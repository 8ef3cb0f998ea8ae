"""What a message becomes before it streams: its conversation (mine, or a new one), the claim on
it, the ``Turn`` to run, and the rows it starts with.

The turn service (``service.turn_start``) calls ``turn_admit`` on the admission threads; its
checks of the text and the sender's rate are ``limits``. Each refusal raises a ``ServiceError``
the transports map, before anything is stored. The rows a turn starts with (a new conversation,
the user message, the agent run) go to the database in one statement with what the turn reads at
the same instant (``apps.core.db.rows_write``).
"""

from __future__ import annotations

import contextlib
import copy
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Model, QuerySet, Subquery
from django.utils import timezone

from apps.agents.events import ToolResume
from apps.agents.history import DEFAULT_HISTORY_LIMIT
from apps.agents.models import AgentDefinition
from apps.agents.plain import effective_model_name
from apps.agents.selectors import (
    AgentDefinitionNotFound,
    agent_definition_check_enabled,
    agent_definition_for_conversation,
    agent_definitions_visible,
)
from apps.agents.services import (
    agent_run_new,
    agent_run_open,
    worker_name,
)
from apps.chat import selectors
from apps.chat.models import Conversation, Message, MessageRole
from apps.chat.streams.frames import ApprovalDecidedFrame
from apps.chat.turns.approval_events import (
    approval_event,
    approvals_settle_claimed,
)
from apps.chat.turns.citations import KnownEntities
from apps.chat.turns.claim import (
    TurnInProgress,
    claim_take,
    claim_take_reading_approvals,
    lease_seconds,
)
from apps.chat.turns.context import to_history
from apps.chat.turns.limits import InvalidMessage, rate_count, rate_enforce, rate_query, rate_since
from apps.chat.turns.turn import CLAIMED_MARK, Turn
from apps.core.db import (
    release_connections,
    rows_write,
)
from apps.core.prepared import QueryTemplate
from apps.graph_tools.models import WriteApproval
from apps.graph_tools.registry import availability_reads
from apps.graph_tools.selectors import approval_result
from apps.graph_tools.versions import graph_version_current, graph_version_query, graph_version_value
from apps.projects.models import Project
from apps.projects.selectors import Principal, parse_uuid, principal_of, project_get


def _title_from(message: str) -> str:
    line = " ".join(message.split())
    return line if len(line) <= 60 else line[:59].rstrip() + "…"


def conversation_for_turn(
    *,
    principal: Principal,
    message: str,
    project_id: object,
    conversation_id: object,
    agent_definition_id: object,
    turn_id: uuid.UUID,
) -> tuple[Conversation, Project, AgentDefinition | None, bool]:
    """The conversation a message goes to: one of mine, or a new one in a project I may use;
    with its project, its agent definition and whether it is new. A new conversation is not saved
    yet (``rows_write`` saves it with the turn's first rows) and is already claimed by ``turn_id``;
    its sender's rate is checked here (a follow-up's with its rows: ``rate_count``).

    Raises 404 (conversation, project), 400 (no project, an unknown agent definition or one the
    sender may not see) or 409 (the definition is disabled). Call it inside the turn's transaction: a refused turn creates nothing.
    """
    if conversation_id:
        conversation = selectors.conversation_get_for_turn(
            principal=principal, conversation_id=conversation_id
        )
        definition = conversation.agent_definition
        if definition is not None:
            if not conversation.definition_visible:  # type: ignore[attr-defined]
                raise AgentDefinitionNotFound("agent definition not found", status=400)
            agent_definition_check_enabled(definition)
        return conversation, conversation.project, definition, False
    if not project_id:
        raise InvalidMessage("projectId is required when conversationId is absent")
    project, definition = _project_and_definition(
        principal=principal, project_id=project_id, agent_definition_id=agent_definition_id
    )
    now = timezone.now()
    conversation = Conversation(
        project=project,
        user_id=principal.user_id,
        title=_title_from(message),
        agent_definition=definition,
        active_turn_id=turn_id,
        active_turn_started_at=now,
        active_turn_worker=worker_name(),
        active_turn_lease_until=now + timedelta(seconds=lease_seconds()),
        active_turn_shown=copy.deepcopy(CLAIMED_MARK),
        created_at=now,
        updated_at=now,
    )
    return conversation, project, definition, True


def _new_conversation_query(
    *,
    user_id: int,
    token_project_id: uuid.UUID | None,
    project_id: uuid.UUID,
    definition_id: uuid.UUID,
    since: datetime | None,
) -> QuerySet[AgentDefinition, Any]:
    """A new conversation's definition with its project, if the sender may use it, and the
    sender's rate (``recent_messages``; no rate limit: not read)."""
    principal = principal_of(user_id=user_id, token_project_id=token_project_id)
    found = (
        agent_definitions_visible(principal=principal)
        .select_related("project")
        .filter(id=definition_id, project_id=project_id)
    )
    if since is not None:
        found = found.annotate(recent_messages=Subquery(rate_query(user_id=user_id, since=since)))
    return found


_NEW_CONVERSATION = QueryTemplate(_new_conversation_query, first=True)


def _project_and_definition(
    *, principal: Principal, project_id: object, agent_definition_id: object
) -> tuple[Project, AgentDefinition | None]:
    """The project of a new conversation and its agent definition, checked usable, once the
    sender's rate is checked (``RateLimited``).

    With both ids (what clients send) one query reads both and the rate; when it finds nothing,
    the rate and the project are read alone, to tell a 404 project from a 400 definition."""
    since = rate_since()
    pid, did = parse_uuid(project_id), parse_uuid(agent_definition_id) if agent_definition_id else None
    if pid and did:
        definition = _NEW_CONVERSATION.first(
            user_id=principal.user_id,
            token_project_id=principal.token_project_id,
            project_id=pid,
            definition_id=did,
            since=since,
        )
        if definition is not None:
            rate_enforce(getattr(definition, "recent_messages", None))
            agent_definition_check_enabled(definition)
            return definition.project, definition
    if since is not None:
        # get(), not first(): first() orders by id, which a COUNT without GROUP BY cannot have.
        rate_enforce(rate_query(user_id=principal.user_id, since=since).get()["n"])
    project = project_get(principal=principal, project_ref=project_id)
    if not agent_definition_id:
        return project, None
    return project, agent_definition_for_conversation(
        principal=principal, project_id=project.id, definition_id=agent_definition_id
    )


def turn_build(
    *,
    turn_id: uuid.UUID,
    conversation: Conversation,
    project: Project,
    definition: AgentDefinition | None,
    user_message: Message,
    resume: ToolResume | None = None,
    new_conversation: bool = False,
    run_id: uuid.UUID | None = None,
    graph_version: int | None = None,
) -> Turn:
    """The ``Turn`` an admitted message becomes: its model, its run id (agent turns), its history.

    A turn that continues after a decided approval (``resume``) reads the history up to now: the
    user message it answers and the rows of the paused turn, which end with the decided call.
    ``graph_version`` is read when not given (the turn service reads it with the turn's rows)."""
    model_name = definition.model_choice.name if definition is not None else settings.KGCHAT_CHAT_MODEL
    limit = max(1, definition.history_limit) if definition is not None else DEFAULT_HISTORY_LIMIT
    # One more than the window, so the agent's history window knows it cut the conversation.
    # A conversation this turn created has nothing before its message.
    history = (
        []
        if new_conversation
        else selectors.message_window(
            conversation_id=conversation.id, limit=limit + 1, before=None if resume else user_message
        )
    )
    return Turn(
        turn_id=turn_id,
        conversation=conversation,
        project=project,
        user_message=user_message,
        agent_definition=definition,
        run_id=(run_id or uuid.uuid4()) if definition is not None else None,
        model=effective_model_name(model_name),
        history=[to_history(m) for m in history],
        known=KnownEntities(conversation.known_entities),
        resume=resume,
        graph_version=graph_version_current(project_id=project.id)
        if graph_version is None
        else graph_version,
    )


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


def admission_executor() -> ThreadPoolExecutor:
    """The threads admissions run on (this process's, renewed in a forked child)."""
    return _admission_pool


def turn_admit(
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
    reading the graph version and the rate. An agent turn's statement also reads the graph tools'
    availability checks (``search_passages``: the project has documents). A refused turn (rate,
    claim, approvals) creates nothing."""
    try:
        turn_id = uuid.uuid4()
        # A new conversation's rows go in one statement after plain reads: no transaction needed.
        with transaction.atomic() if conversation_id else contextlib.nullcontext():
            conversation, project, definition, created = conversation_for_turn(
                principal=principal,
                message=message,
                project_id=project_id,
                conversation_id=conversation_id,
                agent_definition_id=agent_definition_id,
                turn_id=turn_id,
            )
            expired = [] if created else _follow_up_claim(conversation.id, turn_id)
            turn = turn_build(
                turn_id=turn_id,
                conversation=conversation,
                project=project,
                definition=definition,
                user_message=Message(conversation=conversation, role=MessageRole.USER, content=message),
                new_conversation=created,
                graph_version=0,  # read by ``_first_rows_write``, with the rows
            )
            _first_rows_write(turn, principal=principal, created=created)
        return turn, [approval_event(approval) for approval in expired]
    finally:
        # The request that started the turn may stream its frames for minutes: it must not keep
        # a pooled connection meanwhile.
        release_connections()


def _follow_up_claim(conversation_id: uuid.UUID, turn_id: uuid.UUID) -> list[WriteApproval]:
    """Claim a follow-up's conversation for ``turn_id`` (``TurnInProgress`` when a turn holds it)
    and settle its expired approvals; the approvals this closed as expired."""
    has_approvals = claim_take_reading_approvals(conversation_id, turn_id)
    if has_approvals is None:
        raise TurnInProgress("a turn is already running in this conversation; wait for it or cancel it")
    # Only a conversation that ever had an approval has one to settle or wait for.
    return approvals_settle_claimed(conversation_id) if has_approvals else []


def _first_rows_write(turn: Turn, *, principal: Principal, created: bool) -> None:
    """Store the rows a turn starts with (a new conversation, the user message, an agent turn's
    run) in one statement that reads, at the same instant, the graph version, a follow-up's rate
    (``RateLimited``: the caller's transaction rolls its claim and rows back) and, for an agent
    turn, what its tools have to work on in the project (not a round trip before the model's
    first request)."""
    conversation, project, definition = turn.conversation, turn.project, turn.agent_definition
    rows: list[Model] = [conversation, turn.user_message] if created else [turn.user_message]
    if turn.run_id is not None and definition is not None:
        # Opened with the turn's other rows: the executor reaches the model without a write.
        turn.run = agent_run_new(
            project_id=project.id,
            agent_definition_id=definition.pk,
            conversation_id=conversation.id,
            model=turn.model,
            run_id=turn.run_id,
            graph_version=graph_version_value(project.id),
        )
        rows.append(turn.run)
    checks = availability_reads(project.id) if definition is not None else {}
    version, recent, *available = rows_write(
        inserts=rows,
        reads=[graph_version_query(project.id), None if created else rate_count(principal), *checks.values()],
    )
    rate_enforce(recent)
    turn.graph_version = int(version or 0)
    if definition is not None:
        turn.tools_available = {name: bool(found) for name, found in zip(checks, available, strict=True)}
    if turn.run is not None:
        turn.run.graph_version = turn.graph_version


def turn_admit_resumed(approval: WriteApproval) -> Turn | None:
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
            if not claim_take(conversation.id, turn_id):
                raise TurnInProgress(
                    "a turn is already running in this conversation; wait for it or cancel it"
                )
            turn = turn_build(
                turn_id=turn_id,
                conversation=conversation,
                project=conversation.project,
                definition=conversation.agent_definition,
                user_message=user_message,
                resume=ToolResume(
                    call_id=approval.call_id, tool=approval.tool_name, result=approval_result(approval)
                ),
            )
            # Opened with the claim: a process dying after this leaves a turn to resume (its run
            # without events continues the decided call), never a claim without a run.
            assert turn.run_id is not None
            turn.run = agent_run_open(
                project_id=conversation.project_id,
                agent_definition_id=conversation.agent_definition.pk,
                conversation_id=conversation.id,
                model=turn.model,
                run_id=turn.run_id,
                graph_version=turn.graph_version,
            )
        return turn
    finally:
        release_connections()

"""A request of an OpenAI-compatible client as a kgchat turn (``POST /v1/chat/completions``).

The request's last message is the turn's message, given to the one turn service
(``turns.service.turn_start``: rate limits, durable turns, approvals, audit and usage as over
SSE and the websocket), in the conversation its thread maps to (``client_threads``). A reply
``approve`` or ``reject`` to an answer that waits for an approval decides it
(``turns.approvals.approval_decide``) and the turn that continues is the answer. The turn's
frames become typed events (``CompletionEvent``); only the transport turns them into JSON.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from asgiref.sync import sync_to_async
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from apps.agents.models import AgentRun
from apps.chat.conversations.client_threads import history_key, named_key, thread_find, thread_remember
from apps.chat.conversations.openai_models import ChatModel, chat_model_get
from apps.chat.conversations.openai_text import LinkRewriter, Pages, approval_text, sources_text, tool_line
from apps.chat.conversations.usage import answer_run_id
from apps.chat.models import Message
from apps.chat.streams.bus import get_bus
from apps.chat.streams.frames import (
    ApprovalRequiredFrame,
    DoneFrame,
    ErrorFrame,
    McpToolFrame,
    MetaFrame,
    TokenFrame,
)
from apps.chat.turns import approvals
from apps.chat.turns import service as turns
from apps.core.db import release_connections
from apps.core.inputs import InvalidInput
from apps.graph_tools.selectors import approvals_waiting
from apps.projects.selectors import Principal

log = logging.getLogger("kgchat.chat")

# "approve", or "reject" with an optional reason ("reject: not this one").
_DECISION = re.compile(r"^\s*(approve|reject)\b[\s:,.!-]*(.*)$", re.IGNORECASE | re.DOTALL)
MAX_REASON = 2000
# Values a client's header template may send before its thread has an id of its own (a new chat), or
# a placeholder it did not fill: they name no thread (all new chats would be one conversation).
NO_THREAD_NAMES = frozenset({"", "new", "null", "none", "undefined"})


class MessageIn(BaseModel):
    """One message of the client's thread; content is text or OpenAI's list of parts."""

    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class CompletionRequest(BaseModel):
    """The body of ``POST /v1/chat/completions``; the sampling parameters kgchat does not use
    (``temperature``, ``max_tokens``, ``tools``, …) are accepted and left aside."""

    model_config = ConfigDict(extra="allow")
    model: str = Field(min_length=1)
    messages: list[MessageIn] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None


class ContentDelta(BaseModel):
    type: Literal["content"] = "content"
    text: str


class ReasoningDelta(BaseModel):
    """A tool call's progress, told as the model's reasoning (``reasoning_content``)."""

    type: Literal["reasoning"] = "reasoning"
    text: str


class TokenUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class Finished(BaseModel):
    type: Literal["finished"] = "finished"
    usage: TokenUsage
    finish_reason: Literal["stop"] = "stop"


class TurnFailed(BaseModel):
    """The turn ended with an error and stored no answer (``error`` then ``done`` without a message)."""

    type: Literal["failed"] = "failed"
    message: str
    code: str


CompletionEvent = ContentDelta | ReasoningDelta | Finished | TurnFailed


@dataclass
class Completion:
    """A started completion: what names it, and its events until ``Finished`` or ``TurnFailed``."""

    id: str
    model: str
    created: int
    conversation_id: str
    stream: bool
    include_usage: bool
    events: AsyncIterator[CompletionEvent] = field(repr=False)


def completion_request_parse(body: object) -> CompletionRequest:
    """The request, checked; ``InvalidInput`` (400) naming the first field that is wrong."""
    try:
        return CompletionRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        message = str(first.get("msg", "invalid"))
        raise InvalidInput(f"{where}: {message}" if where else message, field=where or None) from None


def _text(message: MessageIn) -> str:
    if isinstance(message.content, list):
        return "".join(str(p.get("text", "")) for p in message.content if p.get("type") == "text")
    return message.content or ""


def _split(messages: Sequence[MessageIn]) -> tuple[str, list[tuple[str, str]]]:
    """The new message's text and the thread's earlier messages (role, text)."""
    last = messages[-1]
    if last.role != "user":
        raise InvalidInput("messages: the last message must be the user's", field="messages")
    return _text(last), [(m.role, _text(m)) for m in messages[:-1] if m.role in ("user", "assistant")]


def thread_name_of(value: str | None) -> str | None:
    """The thread's name a client sent, or None when the value names no thread."""
    name = (value or "").strip()
    return None if name.lower() in NO_THREAD_NAMES or "{{" in name else name


def decision_of(text: str) -> tuple[str, str] | None:
    """("approve" | "reject", reason) when the message answers an approval, else None."""
    found = _DECISION.match(text)
    if found is None:
        return None
    return found.group(1).lower(), found.group(2).strip()[:MAX_REASON]


def _waiting(conversation_id: uuid.UUID) -> uuid.UUID | None:
    try:
        waiting = approvals_waiting(conversation_id=conversation_id)
        return waiting[0].id if waiting else None
    finally:
        release_connections()


async def completion_start(
    *, principal: Principal, body: object, thread_name: str | None, base_url: str
) -> Completion:
    """Start the turn a client's request asks for; its events follow the turn on the frame bus.

    Raises ``InvalidInput`` (400) for a body that is not a chat completion request,
    ``ModelNotFound`` (404) for a model the principal may not talk to, and whatever the turn
    service or an approval's decision refuse (404, 409, 429, …), before anything streams."""
    request = completion_request_parse(body)
    thread_name = thread_name_of(thread_name)
    model = await sync_to_async(chat_model_get)(principal=principal, model_id=request.model)
    text, prior = _split(request.messages)
    keys = [named_key(user_id=principal.user_id, model=model.id, name=thread_name)] if thread_name else []
    if prior:
        keys.append(history_key(user_id=principal.user_id, model=model.id, messages=prior))
    conversation = (
        await sync_to_async(thread_find)(principal=principal, name=thread_name, keys=keys) if keys else None
    )
    decision = decision_of(text) if conversation is not None else None
    approval_id = await sync_to_async(_waiting)(conversation.id) if conversation and decision else None
    turn_id, conversation_id = uuid.uuid4().hex, str(conversation.id) if conversation else ""
    if approval_id is not None and decision is not None:
        decided = await approvals.approval_decide(
            principal=principal, approval_id=approval_id, decision=decision[0], reason=decision[1]
        )
        follows = decided.turn is not None
        turn_id = decided.turn.turn_id if decided.turn else turn_id
    else:
        handle = await turns.turn_start(
            principal=principal,
            message=text,
            project_id=str(model.project_id),
            conversation_id=conversation_id or None,
            agent_definition_id=str(model.agent_definition_id) if model.agent_definition_id else None,
        )
        follows, turn_id, conversation_id = True, handle.turn_id, handle.conversation_id
    if thread_name:
        await sync_to_async(thread_remember)(conversation_id=conversation_id, keys=keys[:1])
    thread = _Thread(
        model=model,
        # A conversation named by its id may be of another project than the model's.
        pages=Pages(
            base_url,
            conversation_id=conversation_id,
            project_id=str(conversation.project_id if conversation else model.project_id),
        ),
        user_id=principal.user_id,
        said=[*prior, ("user", text)],
    )
    events = thread.follow(conversation_id) if follows else thread.decided(decision)
    return Completion(
        id=f"chatcmpl-{str(turn_id).replace('-', '')}",
        model=model.id,
        created=int(time.time()),
        conversation_id=conversation_id,
        stream=request.stream,
        include_usage=bool(request.stream_options and request.stream_options.include_usage),
        events=events,
    )


def _usage(run_id: str | None, message_id: str | None) -> TokenUsage:
    """The tokens the turn's agent run recorded, or for a plain answer (no run in its frames) the
    record stored with it (``usage.answer_run_id``); zeros for a turn with none."""
    try:
        if run_id is None and message_id is not None:
            answer = Message.objects.filter(id=message_id).only("retrieval_context").first()
            found = answer_run_id(answer) if answer is not None else None
            run_id = str(found) if found else None
        if run_id is None:
            return TokenUsage()
        row = AgentRun.objects.filter(id=run_id).values_list("input_tokens", "output_tokens").first()
    finally:
        release_connections()
    prompt, completion = row if row else (0, 0)
    return TokenUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


@dataclass
class _Thread:
    """One completion's view of the turn: the pages it links to and what it has said."""

    model: ChatModel
    pages: Pages
    user_id: int
    said: list[tuple[str, str]]
    sent: list[str] = field(default_factory=list)

    def _content(self, text: str) -> ContentDelta | None:
        if not text:
            return None
        self.sent.append(text)
        return ContentDelta(text=text)

    async def follow(self, conversation_id: str) -> AsyncIterator[CompletionEvent]:
        """The turn's frames as events, then ``Finished`` (or ``TurnFailed``); the thread's key
        is recorded before the last event, so the client's next message finds the conversation."""
        links, run_id = LinkRewriter(self.pages), None
        error: ErrorFrame | None = None
        done = DoneFrame(messageId=None, runId=None)
        async for frame in get_bus().subscribe(conversation_id):
            event: CompletionEvent | None = None
            if isinstance(frame, MetaFrame):
                run_id = frame.runId
            elif isinstance(frame, TokenFrame):
                event = self._content(links.feed(frame.token))
            elif isinstance(frame, McpToolFrame):
                links.learn(frame.result)
                event = ReasoningDelta(text=tool_line(frame))
            elif isinstance(frame, ApprovalRequiredFrame):
                event = self._content(links.flush() + approval_text(frame, self.pages))
            elif isinstance(frame, ErrorFrame):
                error = frame
            elif isinstance(frame, DoneFrame):
                done = frame
            if event is not None:
                yield event
        tail = links.flush()
        if error is not None and done.messageId is None:
            yield TurnFailed(message=error.error, code=error.code)
            return
        if error is not None:
            tail += f"\n\n*(The answer stopped: {error.error}.)*"
        tail += sources_text(done.citations, self.pages, linked=frozenset(links.linked))
        event = self._content(tail)
        if event is not None:
            yield event
        await self._remember()
        yield Finished(usage=await sync_to_async(_usage)(done.runId or run_id, done.messageId))

    async def decided(self, decision: tuple[str, str] | None) -> AsyncIterator[CompletionEvent]:
        """An approval decided with nothing to continue (the agent or conversation is gone)."""
        word = "Approved" if decision and decision[0] == "approve" else "Rejected"
        event = self._content(
            f"{word}. Nothing continues in this conversation ({self.pages.conversation()})."
        )
        if event is not None:
            yield event
        await self._remember()
        yield Finished(usage=TokenUsage())

    async def _remember(self) -> None:
        """Record the thread's key for its next message. A failure loses only that: the answer was
        given (the next message, not found, starts a new conversation), so it is logged, not raised."""
        said = [*self.said, ("assistant", "".join(self.sent))]
        key = history_key(user_id=self.user_id, model=self.model.id, messages=said)
        try:
            await sync_to_async(thread_remember)(conversation_id=self.pages.conversation_id, keys=[key])
        except Exception:
            log.warning(
                "conversation %s: its client thread's key was not recorded",
                self.pages.conversation_id,
                exc_info=True,
            )

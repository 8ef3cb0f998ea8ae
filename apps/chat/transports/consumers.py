"""The chat websocket (PROTOCOL §4): a thin consumer over the turn service and the frame bus.

A socket follows the turns it starts or subscribes to, and watches every conversation it
subscribed to or sent to: the bus's conversation events reach it whoever caused them, in whichever
process. A turn another socket (tab, device, API client) started (``turn_started``), and a
decision that continues the conversation (``approval_decided``), are then followed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from pydantic import BaseModel, ConfigDict, ValidationError

from apps.chat import selectors
from apps.chat.streams.bus import Watch, get_bus
from apps.chat.streams.frames import ChatMessageIn, ErrorFrame, TurnStartedFrame
from apps.chat.turns import approvals
from apps.chat.turns import service as turns
from apps.core.failures import error_classify
from apps.core.inputs import InvalidInput, json_parse
from apps.projects.selectors import Principal, principal_from_user

log = logging.getLogger("kgchat.ws")

CLOSE_UNAUTHENTICATED = 4401
# A page shows one conversation; a socket that went through many watches only the latest ones.
MAX_WATCHES = 20


class ConversationIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str
    conversationId: str
    afterSeq: int = 0


class ApprovalIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str
    approvalId: str
    decision: str
    reason: str | None = None


class ChatConsumer(AsyncJsonWebsocketConsumer):
    principal: Principal | None = None

    async def connect(self) -> None:
        self.principal = principal_from_user(self.scope.get("user"))
        self.follows: dict[str, asyncio.Task[None]] = {}
        self.watches: dict[str, asyncio.Task[None]] = {}
        # Approvals this socket decided: their announcement would repeat its own answer.
        self.decided: set[str] = set()
        # The user message of the latest turn this socket started, by conversation: it follows that
        # turn already, and its announcement would replay it from the start.
        self.started: dict[str, str] = {}
        await self.accept()
        if self.principal is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)

    async def disconnect(self, code: int) -> None:
        for task in [*self.follows.values(), *self.watches.values()]:
            task.cancel()
        self.follows.clear()
        self.watches.clear()

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        try:
            content = json_parse(
                text_data or (bytes_data or b"").decode("utf-8", "replace"), what="the message"
            )
        except InvalidInput as exc:
            await self.send_error(exc.message, exc.code)
            return
        if not isinstance(content, dict):
            await self.send_error("a message must be a JSON object", "invalid_request")
            return
        await self.receive_json(content)

    async def receive_json(self, content: dict[str, Any], **kwargs: Any) -> None:
        kind = content.get("type")
        handlers = {
            "chat.message": self.on_message,
            "chat.cancel": self.on_cancel,
            "chat.subscribe": self.on_subscribe,
            "chat.approval": self.on_approval,
        }
        handler = handlers.get(kind) if isinstance(kind, str) else None
        if handler is None:
            await self.send_error(f"unknown message type {kind!r}", "invalid_request")
            return
        try:
            await handler(content)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            await self.send_error(f"invalid {kind}: {problems}", "invalid_request")
        except Exception as exc:
            failure = error_classify(exc, where=f"websocket {kind}")
            await self.send_error(failure.message, failure.code)

    async def send_error(self, message: str, code: str) -> None:
        await self.send_json(ErrorFrame(error=message, code=code).model_dump(mode="json", exclude={"seq"}))

    async def on_message(self, content: dict[str, Any]) -> None:
        request = ChatMessageIn.model_validate(content)
        assert self.principal is not None
        handle = await turns.turn_start(
            principal=self.principal,
            message=request.message,
            project_id=request.projectId,
            conversation_id=request.conversationId,
            agent_definition_id=request.agentDefinitionId,
        )
        # Before anything awaits: the turn's task (which announces it) has not run yet.
        self.started[handle.conversation_id] = handle.user_message_id
        self.follow(handle.conversation_id, after_seq=0, include_finished=True)
        await self._watch_or_log(handle.conversation_id)

    async def on_cancel(self, content: dict[str, Any]) -> None:
        request = ConversationIn.model_validate(content)
        assert self.principal is not None
        if not await turns.turn_cancel(principal=self.principal, conversation_id=request.conversationId):
            await self.send_error("no turn is running in this conversation", "not_running")

    async def on_subscribe(self, content: dict[str, Any]) -> None:
        request = ConversationIn.model_validate(content)
        assert self.principal is not None
        conversation = await selectors.aconversation_get(
            principal=self.principal, conversation_id=request.conversationId
        )
        # A turn holding the claim that this process does not run yet (its own process died, and
        # this one is about to take it over) is followed once it is taken over.
        holder = str(conversation.active_turn_id) if conversation.active_turn_id else None
        self.follow(
            str(conversation.id),
            after_seq=request.afterSeq,
            include_finished=request.afterSeq > 0,
            turn_id=holder,
        )
        await self._watch_or_log(str(conversation.id))

    async def on_approval(self, content: dict[str, Any]) -> None:
        request = ApprovalIn.model_validate(content)
        assert self.principal is not None
        self.decided.add(request.approvalId)
        decided = await approvals.approval_decide(
            principal=self.principal,
            approval_id=request.approvalId,
            decision=request.decision,
            reason=request.reason,
        )
        await self.send_json(decided.event.wire())
        if decided.turn is not None:
            self.follow(decided.turn.conversation_id, after_seq=0, include_finished=True)

    async def _watch_or_log(self, conversation_id: str) -> None:
        """Watch, after the turn's frames are already followed: a watch that fails (Redis did not
        confirm in time under a starved loop) loses later conversation events, not the turn, so it
        is logged rather than answered with ``internal_error``."""
        try:
            await self.watch(conversation_id)
        except Exception:
            log.warning("websocket: could not watch conversation %s", conversation_id, exc_info=True)

    async def watch(self, conversation_id: str) -> None:
        """Watch the conversation's events from now on (registered before this returns)."""
        if conversation_id in self.watches:
            return
        while len(self.watches) >= MAX_WATCHES:
            oldest = next(iter(self.watches))
            self.watches.pop(oldest).cancel()
        events = await get_bus().watch(conversation_id)
        self.watches[conversation_id] = asyncio.create_task(self._watch(conversation_id, events))

    async def _watch(self, conversation_id: str, events: Watch) -> None:
        try:
            async for event in events:
                if isinstance(event, TurnStartedFrame):
                    if self.started.get(conversation_id) == event.messageId:
                        continue
                    await self.send_json(event.wire())
                    self.follow(conversation_id, after_seq=0, include_finished=True)
                    continue
                if event.status != "expired" and event.approvalId in self.decided:
                    continue
                await self.send_json(event.wire())
                if event.continued:
                    self.follow(conversation_id, after_seq=0, include_finished=True)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("watching conversation %s failed", conversation_id)
        finally:
            await events.aclose()
            if self.watches.get(conversation_id) is asyncio.current_task():
                del self.watches[conversation_id]

    def follow(
        self, conversation_id: str, *, after_seq: int, include_finished: bool, turn_id: str | None = None
    ) -> None:
        previous = self.follows.pop(conversation_id, None)
        if previous is not None:
            previous.cancel()
        task = asyncio.create_task(self._forward(conversation_id, after_seq, include_finished, turn_id))
        self.follows[conversation_id] = task

    async def _forward(
        self, conversation_id: str, after_seq: int, include_finished: bool, turn_id: str | None
    ) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            if turn_id is not None:
                await turns.turn_opened(conversation_id, turn_id)
            async for frame in get_bus().subscribe(
                conversation_id, after_seq=after_seq, include_finished=include_finished
            ):
                await self.send(text_data=frame.text())
        current = self.follows.get(conversation_id)
        if current is asyncio.current_task():
            del self.follows[conversation_id]

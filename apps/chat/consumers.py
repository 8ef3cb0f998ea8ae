"""The chat websocket (PROTOCOL §4): a thin consumer over the turn service and the frame bus."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from pydantic import BaseModel, ConfigDict, ValidationError

from apps.chat import approvals, selectors, services
from apps.chat.bus import get_bus
from apps.chat.frames import ChatMessageIn, ErrorFrame
from apps.projects.db import DatabaseBusy, is_database_busy
from apps.projects.errors import ServiceError
from apps.projects.inputs import InvalidInput, bad_input_from, json_parse
from apps.projects.selectors import Principal, principal_from_user

log = logging.getLogger("kgchat.ws")

CLOSE_UNAUTHENTICATED = 4401


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
        await self.accept()
        if self.principal is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)

    async def disconnect(self, code: int) -> None:
        for task in self.follows.values():
            task.cancel()
        self.follows.clear()

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
        except ServiceError as exc:
            await self.send_error(exc.message, exc.code)
        except Exception as exc:
            if is_database_busy(exc):
                busy = DatabaseBusy()
                await self.send_error(busy.message, busy.code)
                return
            bad_input = bad_input_from(exc)
            if bad_input is not None:
                log.warning("websocket %s: refused input the checks missed: %s", kind, exc)
                await self.send_error(bad_input.message, bad_input.code)
                return
            log.exception("websocket %s failed", kind)
            await self.send_error("internal error", "internal_error")

    async def send_error(self, message: str, code: str) -> None:
        await self.send_json(ErrorFrame(error=message, code=code).model_dump(mode="json", exclude={"seq"}))

    async def on_message(self, content: dict[str, Any]) -> None:
        request = ChatMessageIn.model_validate(content)
        assert self.principal is not None
        handle = await services.turn_start(
            principal=self.principal,
            message=request.message,
            project_id=request.projectId,
            conversation_id=request.conversationId,
            agent_definition_id=request.agentDefinitionId,
        )
        self.follow(handle.conversation_id, after_seq=0, include_finished=True)

    async def on_cancel(self, content: dict[str, Any]) -> None:
        request = ConversationIn.model_validate(content)
        assert self.principal is not None
        if not await services.turn_cancel(principal=self.principal, conversation_id=request.conversationId):
            await self.send_error("no turn is running in this conversation", "not_running")

    async def on_subscribe(self, content: dict[str, Any]) -> None:
        request = ConversationIn.model_validate(content)
        assert self.principal is not None
        conversation = await selectors.aconversation_get(
            principal=self.principal, conversation_id=request.conversationId
        )
        self.follow(str(conversation.id), after_seq=request.afterSeq, include_finished=request.afterSeq > 0)

    async def on_approval(self, content: dict[str, Any]) -> None:
        request = ApprovalIn.model_validate(content)
        assert self.principal is not None
        decided = await approvals.approval_decide(
            principal=self.principal,
            approval_id=request.approvalId,
            decision=request.decision,
            reason=request.reason,
        )
        approval = decided.approval
        await self.send_json(
            {
                "type": "approval_decided",
                "approvalId": str(approval.id),
                "conversationId": str(approval.conversation_id) if approval.conversation_id else None,
                "status": approval.status,
                "result": approval.result,
            }
        )
        if decided.turn is not None:
            self.follow(decided.turn.conversation_id, after_seq=0, include_finished=True)

    def follow(self, conversation_id: str, *, after_seq: int, include_finished: bool) -> None:
        previous = self.follows.pop(conversation_id, None)
        if previous is not None:
            previous.cancel()
        task = asyncio.create_task(self._forward(conversation_id, after_seq, include_finished))
        self.follows[conversation_id] = task

    async def _forward(self, conversation_id: str, after_seq: int, include_finished: bool) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            async for frame in get_bus().subscribe(
                conversation_id, after_seq=after_seq, include_finished=include_finished
            ):
                await self.send_json(frame.wire())
        current = self.follows.get(conversation_id)
        if current is asyncio.current_task():
            del self.follows[conversation_id]

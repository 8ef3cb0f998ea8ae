"""The OpenAI-compatible endpoint under ``/v1`` (docs/protocol.md, "/v1"): a kgchat project's
agents and plain chat as models, for Open WebUI, LibreChat and any client of OpenAI's chat API.

Each view makes one service call (``openai_models.chat_models_list``,
``openai_turns.completion_start``) and writes its answer in OpenAI's shapes: a model list, a
``chat.completion``, or Server-Sent ``chat.completion.chunk`` events ending with ``[DONE]``.
Authentication is an API token as the Bearer key, as for ``/mcp``; every error, whatever raised
it, is OpenAI's ``{"error": {"message", "type", "param", "code"}}`` (``error_classify`` names it).
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from apps.chat.conversations.openai_models import ChatModel, chat_model_get, chat_models_list
from apps.chat.conversations.openai_turns import (
    Completion,
    ContentDelta,
    Finished,
    ReasoningDelta,
    TurnFailed,
    completion_start,
)
from apps.core.db import release_connections
from apps.core.errors import ServiceError
from apps.core.failures import error_classify
from apps.core.inputs import json_parse
from apps.projects.auth import bearer_secret
from apps.projects.selectors import Principal, principal_from_token

# The header that names a client's thread (a kgchat conversation's id, or the client's own id).
THREAD_HEADER = "X-Kgchat-Conversation"
ERROR_TYPES = {403: "permission_error", 429: "rate_limit_error"}
# A turn that failed after it was admitted (an ``error`` frame, no answer stored), by its code.
FAILED_STATUS = {"timeout": 504, "cancelled": 409, "conversation_deleted": 409, "rate_limited": 429}


class InvalidApiKey(ServiceError):
    """a valid kgchat API token is required as the Bearer key (Authorization: Bearer <token>)"""

    status = 401
    code = "invalid_api_key"


class UnknownRoute(ServiceError):
    """unknown route"""

    status = 404
    code = "unknown_url"


class MethodNotAllowed(ServiceError):
    """method not allowed"""

    status = 405
    code = "method_not_allowed"


def openai_error(status: int, message: str, code: str, param: str | None = None) -> JsonResponse:
    """An error in OpenAI's shape."""
    kind = ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JsonResponse(body, status=status)


def _error_response(exc: BaseException, request: HttpRequest) -> JsonResponse:
    failure = error_classify(exc, where=f"{request.method} {request.path}")
    return openai_error(failure.status, failure.message, failure.code, getattr(failure, "field", None))


View = Callable[..., Coroutine[Any, Any, HttpResponse | StreamingHttpResponse]]


def _openai_view(method: str | None) -> Callable[[View], View]:
    """An async view of ``/v1``: one method (None: any), no CSRF (a Bearer key, no cookie), errors
    as OpenAI's."""

    def wrap(view: View) -> View:
        @csrf_exempt
        @functools.wraps(view)
        async def handle(request: HttpRequest, **kwargs: str) -> HttpResponse | StreamingHttpResponse:
            try:
                if method is not None and request.method != method:
                    raise MethodNotAllowed(f"{request.path} answers {method} only")
                return await view(request, **kwargs)
            except Exception as exc:
                return _error_response(exc, request)

        return handle

    return wrap


def _principal_of_key(secret: str | None) -> Principal:
    try:
        principal = principal_from_token(secret=secret) if secret else None
    finally:
        release_connections()
    if principal is None:
        raise InvalidApiKey()
    return principal


async def _principal(request: HttpRequest) -> Principal:
    return await sync_to_async(_principal_of_key)(bearer_secret(request))


def _model_out(m: ChatModel) -> dict[str, Any]:
    return {
        "id": m.id,
        "object": "model",
        "created": int(m.created.timestamp()),
        "owned_by": f"kgchat/{m.project_slug}",
        "name": m.name,
    }


@_openai_view("GET")
async def models(request: HttpRequest) -> HttpResponse:
    """``GET /v1/models``: the agents and plain chats of the projects the key may see."""
    listed = await sync_to_async(chat_models_list)(principal=await _principal(request))
    return JsonResponse({"object": "list", "data": [_model_out(m) for m in listed]})


@_openai_view("GET")
async def model(request: HttpRequest, model_id: str) -> HttpResponse:
    """``GET /v1/models/{model}``: one of them (404 ``model_not_found`` for any other)."""
    found = await sync_to_async(chat_model_get)(principal=await _principal(request), model_id=model_id)
    return JsonResponse(_model_out(found))


@_openai_view("POST")
async def chat_completions(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """``POST /v1/chat/completions``: one kgchat turn, streamed or as one completion."""
    principal = await _principal(request)
    completion = await completion_start(
        principal=principal,
        body=json_parse(request.body),
        thread_name=request.headers.get(THREAD_HEADER) or None,
        base_url=settings.KGCHAT_PUBLIC_URL or request.build_absolute_uri("/"),
    )
    if not completion.stream:
        answer = await _completion(completion)
        answer[THREAD_HEADER] = completion.conversation_id
        return answer
    response = StreamingHttpResponse(_chunks(completion), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    response[THREAD_HEADER] = completion.conversation_id
    return response


@_openai_view(None)
async def unknown(request: HttpRequest) -> HttpResponse:
    raise UnknownRoute(f"no route {request.path} under /v1 (there are /v1/models and /v1/chat/completions)")


def _chunk(completion: Completion, delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": completion.id,
        "object": "chat.completion.chunk",
        "created": completion.created,
        "model": completion.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return _event(body)


def _event(body: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()


def _error_event(message: str, code: str) -> bytes:
    return _event({"error": {"message": message, "type": "server_error", "param": None, "code": code}})


async def _chunks(completion: Completion) -> AsyncIterator[bytes]:
    """The completion's events as ``chat.completion.chunk`` events, then ``[DONE]``; whatever fails
    once the status is sent is an error event (``error_classify``), and the stream still ends."""
    yield _chunk(completion, {"role": "assistant", "content": ""})
    try:
        async for chunk in _event_chunks(completion):
            yield chunk
    except Exception as exc:
        failure = error_classify(
            exc, where=f"POST /v1/chat/completions, conversation {completion.conversation_id}"
        )
        yield _error_event(failure.message, failure.code)
    yield b"data: [DONE]\n\n"


async def _event_chunks(completion: Completion) -> AsyncIterator[bytes]:
    async for event in completion.events:
        if isinstance(event, ContentDelta):
            yield _chunk(completion, {"content": event.text})
        elif isinstance(event, ReasoningDelta):
            yield _chunk(completion, {"reasoning_content": event.text})
        elif isinstance(event, TurnFailed):
            # Mid-stream the status is sent already: an error event, as OpenAI's stream has one.
            yield _error_event(event.message, event.code)
        elif isinstance(event, Finished):
            yield _chunk(completion, {}, finish=event.finish_reason)
            if completion.include_usage:
                usage = {
                    "id": completion.id,
                    "object": "chat.completion.chunk",
                    "created": completion.created,
                    "model": completion.model,
                    "choices": [],
                    "usage": event.usage.model_dump(),
                }
                yield _event(usage)


async def _completion(completion: Completion) -> HttpResponse:
    """The completion's events as one ``chat.completion`` (or the turn's failure as an error)."""
    content: list[str] = []
    reasoning: list[str] = []
    finished: Finished | None = None
    async for event in completion.events:
        if isinstance(event, ContentDelta):
            content.append(event.text)
        elif isinstance(event, ReasoningDelta):
            reasoning.append(event.text)
        elif isinstance(event, TurnFailed):
            return openai_error(FAILED_STATUS.get(event.code, 502), event.message, event.code)
        elif isinstance(event, Finished):
            finished = event
    assert finished is not None, "a completion's events end with Finished or TurnFailed"
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    return JsonResponse(
        {
            "id": completion.id,
            "object": "chat.completion",
            "created": completion.created,
            "model": completion.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finished.finish_reason}],
            "usage": finished.usage.model_dump(),
        }
    )

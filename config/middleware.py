"""Every response under /api is JSON, including Django's own 404, 405 and 500 pages; Django's own
middlewares with the hooks that do no I/O run on the event loop (``_OnTheLoop``)."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.auth import middleware as auth_middleware
from django.contrib.messages import middleware as messages_middleware
from django.contrib.sessions import middleware as sessions_middleware
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware import common

from apps.core.inputs import InvalidInput, input_check

CODES = {
    400: "invalid_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    500: "internal_error",
}


def _as_json(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    if not request.path.startswith("/api/") or response.status_code < 400:
        return response
    if "json" in response.get("Content-Type", "") or getattr(response, "streaming", False):
        return response
    status = response.status_code
    phrase = HTTPStatus(status).phrase.lower() if status in HTTPStatus._value2member_map_ else "error"
    message = f"{phrase}: {request.method} {request.path}" if status in (404, 405) else phrase
    body = {"error": message, "code": CODES.get(status, phrase.replace(" ", "_"))}
    json_response = JsonResponse(body, status=status)
    if "Allow" in response:
        json_response["Allow"] = response["Allow"]
    return json_response


class ApiJsonErrorsMiddleware:
    """Turn non-JSON error responses of /api paths into ``{"error", "code"}``."""

    async_capable = True
    sync_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if iscoroutinefunction(self):
            return self.__acall__(request)  # type: ignore[return-value]
        return _as_json(request, self.get_response(request))

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        response = await self.get_response(request)  # type: ignore[misc]
        return _as_json(request, response)


def _url_problem(request: HttpRequest) -> HttpResponse | None:
    if not request.path.startswith("/api/"):
        return None
    try:
        input_check(request.path, field="path")
        for name, values in request.GET.lists():
            input_check(name, field="query")
            for value in values:  # each value of a repeated parameter is that parameter, not name.0
                input_check(value, field=name)
    except InvalidInput as exc:
        return JsonResponse({"error": exc.message, "code": exc.code, **exc.extra}, status=400)
    return None


class ApiInputMiddleware:
    """Refuse an /api URL whose path or query holds text PostgreSQL cannot store (NUL, lone surrogates).

    Path parameters reach the views without passing ninja's parser; this is their input boundary.
    """

    async_capable = True
    sync_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if iscoroutinefunction(self):
            return self.__acall__(request)  # type: ignore[return-value]
        return _url_problem(request) or self.get_response(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        refused = _url_problem(request)
        if refused is not None:
            return refused
        return await self.get_response(request)  # type: ignore[misc, no-any-return]


class _OnTheLoop:
    """Runs a Django middleware's ``process_request`` and ``process_response`` on the event loop
    when they do no I/O, instead of on the request's thread.

    Under ASGI, Django's ``MiddlewareMixin`` sends each of those hooks to a thread and back
    (``sync_to_async``): thirteen hops for kgchat's stack, whose hooks read the request and set
    headers, seven of them in the four below. While a streamed answer's response goes back up
    through them, its turn is starting beside them (docs/benchmarks.md). A hook that
    may reach the database (a session to save, messages to store) still goes to the thread.
    """

    get_response: Callable[[HttpRequest], Any]

    def request_in_place(self, request: HttpRequest) -> bool:
        return True

    def response_in_place(self, request: HttpRequest, response: HttpResponse) -> bool:
        return True

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        response: HttpResponse | None = None
        process_request = getattr(self, "process_request", None)
        if process_request is not None:
            if self.request_in_place(request):
                response = process_request(request)
            else:
                response = await sync_to_async(process_request, thread_sensitive=True)(request)
        response = response or await self.get_response(request)
        process_response = getattr(self, "process_response", None)
        if process_response is not None:
            if self.response_in_place(request, response):
                return process_response(request, response)
            return await sync_to_async(process_response, thread_sensitive=True)(request, response)
        return response


class CommonMiddleware(_OnTheLoop, common.CommonMiddleware):
    """Django's, its hooks in place (the slash redirect resolves URLs; Content-Length)."""


class AuthenticationMiddleware(_OnTheLoop, auth_middleware.AuthenticationMiddleware):
    """Django's, its hook in place: it only sets ``request.user``, read lazily where it is needed."""


class SessionMiddleware(_OnTheLoop, sessions_middleware.SessionMiddleware):
    """Django's: the session is made in place (read lazily); saved on the thread when it changed."""

    def response_in_place(self, request: HttpRequest, response: HttpResponse) -> bool:
        session = getattr(request, "session", None)
        return session is None or not (session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class MessageMiddleware(_OnTheLoop, messages_middleware.MessageMiddleware):
    """Django's: its storage made in place; messages stored on the thread when there are any to store."""

    def response_in_place(self, request: HttpRequest, response: HttpResponse) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is None or not (storage.used or storage.added_new)

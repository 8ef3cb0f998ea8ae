"""Every response under /api is JSON, including Django's own 404, 405 and 500 pages."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse, JsonResponse

from apps.core.inputs import InvalidInput, input_check

CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large", 500: "internal_error"}


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

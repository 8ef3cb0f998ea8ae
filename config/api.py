"""The one NinjaAPI. Each app contributes a router; errors are mapped to JSON once, here."""

from __future__ import annotations

import logging
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser

from apps.core.errors import ServiceError
from apps.core.failures import error_classify
from apps.core.inputs import InvalidInput, json_parse
from apps.projects.auth import token_or_session

log = logging.getLogger("kgchat.api")


class CheckedJsonParser(Parser):
    """Parse JSON bodies through the input boundary (no NUL, no lone surrogate, bounded nesting)."""

    def parse_body(self, request: HttpRequest) -> Any:
        return json_parse(request.body)


api = NinjaAPI(
    title="kgchat", version="1", urls_namespace="api", auth=token_or_session, parser=CheckedJsonParser()
)


def _error(request: HttpRequest, status: int, message: str, code: str, **extra: object) -> HttpResponse:
    return api.create_response(request, {"error": message, "code": code, **extra}, status=status)


@api.exception_handler(ServiceError)
def on_service_error(request: HttpRequest, exc: ServiceError) -> HttpResponse:
    return _error(request, exc.status, exc.message, exc.code, **getattr(exc, "extra", {}))


@api.exception_handler(AuthenticationError)
def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return _error(
        request, 401, "authentication required: a session or 'Authorization: Bearer <token>'", "unauthorized"
    )


@api.exception_handler(ValidationError)
def on_validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    details = []
    for err in exc.errors:
        loc = [str(p) for p in err.get("loc", []) if p not in ("body", "query", "path", "payload")]
        details.append({"field": ".".join(loc), "message": err.get("msg", "")})
    summary = "; ".join(f"{d['field']}: {d['message']}" if d["field"] else d["message"] for d in details)
    return _error(request, 400, f"invalid request: {summary}", "invalid_request", details=details)


HTTP_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
}


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if isinstance(exc.__cause__, InvalidInput):  # ninja wraps what the body parser raised
        return on_service_error(request, exc.__cause__)
    return _error(request, exc.status_code, str(exc), HTTP_CODES.get(exc.status_code, "http_error"))


@api.exception_handler(Exception)
def on_unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    return on_service_error(request, error_classify(exc, where=f"{request.method} {request.path}"))


def _register_routers() -> None:
    from apps.agents.api import router as agents_router
    from apps.chat.transports.api import router as chat_router
    from apps.chat.transports.approvals_api import router as approvals_router
    from apps.chat.transports.conversations_api import router as chat_team_router
    from apps.curation.api import router as curation_router
    from apps.curation.graph_api import router as curation_graph_router
    from apps.documents.api import router as documents_router
    from apps.documents.ontology_api import router as ontology_draft_router
    from apps.graph_tools.api import router as graph_router
    from apps.graph_tools.ontology.api import router as ontology_router
    from apps.graph_tools.tools_api import router as graph_tools_router
    from apps.projects.api import router as projects_router
    from apps.usage.api import router as usage_router

    api.add_router("/", projects_router)
    api.add_router("/", graph_router)
    api.add_router("/", graph_tools_router)
    api.add_router("/", ontology_router)
    api.add_router("/", documents_router)
    api.add_router("/", ontology_draft_router)
    api.add_router("/", agents_router)
    api.add_router("/", chat_router)
    api.add_router("/", chat_team_router)
    api.add_router("/", approvals_router)
    api.add_router("/", usage_router)
    api.add_router("/", curation_router)
    api.add_router("/", curation_graph_router)


_register_routers()

"""Authentication for ninja routes: a Bearer API token or the Django session."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from ninja.security import APIKeyCookie
from ninja.utils import check_csrf

from apps.core.db import release_connections
from apps.projects.selectors import Principal, principal_from_token, principal_from_user


def bearer_secret(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip()


class TokenOrSession(APIKeyCookie):
    """Accept ``Authorization: Bearer <token>``, else the session cookie (with Django's CSRF check)."""

    param_name = "sessionid"
    openapi_description = "Bearer API token (Authorization header) or the Django session cookie."

    def __call__(self, request: HttpRequest) -> Principal | None:
        secret = bearer_secret(request)
        if secret is not None:
            return principal_from_token(secret=secret)
        principal = principal_from_user(getattr(request, "user", None))
        if principal is None:
            return None
        if request.method not in ("GET", "HEAD", "OPTIONS") and check_csrf(request) is not None:
            return None
        return principal

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:  # pragma: no cover - unused
        return None


token_or_session = TokenOrSession()


class TokenOrSessionReleasing(TokenOrSession):
    """``TokenOrSession`` for a route whose answer streams for as long as a turn runs.

    The token or session is read on the request's thread, and Django gives that thread's database
    connection back only when the response ends. A streamed turn would hold it all along while its
    own work borrows others, so fifty SSE turns at once emptied a pool of twenty and every one
    waited for the pool's timeout (issue #23). Here the connection goes back as soon as the
    caller is known, in the same hop to that thread.
    """

    async def __call__(self, request: HttpRequest) -> Principal | None:  # type: ignore[override]
        return await sync_to_async(self._known_then_release)(request)

    def _known_then_release(self, request: HttpRequest) -> Principal | None:
        try:
            return super().__call__(request)
        finally:
            release_connections()


token_or_session_releasing = TokenOrSessionReleasing()


def principal_of(request: HttpRequest) -> Principal:
    principal = getattr(request, "auth", None)
    assert isinstance(principal, Principal), "route is missing auth=token_or_session"
    return principal

"""What a caller is told when a service fails: one classifier for every transport.

REST, SSE, the websocket, MCP and a running turn each turn an exception into their own medium (a
JSON error, an ``error`` frame, an ``isError`` result), but what the exception *is* is decided
here, once: a ``ServiceError`` is what it says; a request Django refused for its size or shape
while reading it is ``RequestRefused`` (413 ``payload_too_large`` or 400 ``invalid_request``); a
database or pool with no connection to give is ``DatabaseBusy`` (503 ``database_busy``); a
client's value that got past the input checks and was refused by the database or the codec is
``InvalidInput`` (400); anything else is a bug, ``InternalError`` (500 ``internal_error``), logged
with its traceback and never shown.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import (
    BadRequest,
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import UnreadablePostError
from django.http.multipartparser import (  # type: ignore[attr-defined]  # the stubs omit the constant
    MAX_TOTAL_HEADER_SIZE,
    MultiPartParserError,
)

from apps.core.db import DatabaseBusy, is_database_busy
from apps.core.errors import ServiceError
from apps.core.inputs import bad_input_from

log = logging.getLogger("kgchat.failures")


class InternalError(ServiceError):
    """internal error"""

    status = 500
    code = "internal_error"


class RequestRefused(ServiceError):
    """the request could not be read"""

    code = "invalid_request"


def request_refusal(exc: BaseException) -> RequestRefused | None:
    """What to answer for a request Django refused while reading its body (``request.body``,
    ``POST``, ``FILES``), or None: its size, its number of fields or files, a multipart body it
    cannot parse (a part's headers over its limit: a file name of thousands of characters), a
    body cut short, any ``SuspiciousOperation`` or ``BadRequest``. The client's doing, never a 500."""
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return RequestRefused(
            f"the request body is too large: at most {limit} bytes outside uploaded files",
            code="payload_too_large",
            status=413,
        )
    if isinstance(exc, TooManyFieldsSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        return RequestRefused(f"the request has too many fields: at most {limit}")
    if isinstance(exc, TooManyFilesSent):
        return RequestRefused(
            f"the request has too many files: at most {settings.DATA_UPLOAD_MAX_NUMBER_FILES}"
        )
    if isinstance(exc, MultiPartParserError):
        if "header size" in str(exc):
            return RequestRefused(
                f"a part of the multipart body has headers over {MAX_TOTAL_HEADER_SIZE} bytes "
                "(a file name that long cannot be sent in them: a document upload takes it in its 'name' field)"
            )
        return RequestRefused(f"the multipart body could not be read: {exc}")
    if isinstance(exc, UnreadablePostError):
        return RequestRefused("the request body could not be read: the connection ended before it did")
    if isinstance(exc, SuspiciousOperation | BadRequest):
        return RequestRefused(f"the request was refused as malformed ({type(exc).__name__})")
    return None


def error_classify(exc: BaseException, *, where: str) -> ServiceError:
    """The ``ServiceError`` to answer for ``exc``, raised while serving ``where`` (e.g.
    ``"POST /api/chat/stream"``, ``"websocket chat.message"``, ``"MCP tool hybrid_search"``).

    Logs what is not the client's doing: a busy database as a warning, a bug with its traceback.
    """
    if isinstance(exc, ServiceError):
        return exc
    refused = request_refusal(exc)
    if refused is not None:
        log.warning("refused a request in %s: %s: %s", where, type(exc).__name__, exc)
        return refused
    if is_database_busy(exc):
        log.warning("database busy in %s: %s", where, exc)
        return DatabaseBusy()
    bad_input = bad_input_from(exc)
    if bad_input is not None:
        log.warning("refused input the checks missed in %s: %s", where, exc)
        return bad_input
    log.error("unexpected error in %s", where, exc_info=exc)
    return InternalError()

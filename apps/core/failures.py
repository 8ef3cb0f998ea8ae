"""What a caller is told when a service fails: one classifier for every transport.

REST, SSE, the websocket, MCP and a running turn each turn an exception into their own medium (a
JSON error, an ``error`` frame, an ``isError`` result), but what the exception *is* is decided
here, once: a ``ServiceError`` is what it says; a database or pool with no connection to give is
``DatabaseBusy`` (503 ``database_busy``); a client's value that got past the input checks and was
refused by the database or the codec is ``InvalidInput`` (400); anything else is a bug,
``InternalError`` (500 ``internal_error``), logged with its traceback and never shown.
"""

from __future__ import annotations

import logging

from apps.core.db import DatabaseBusy, is_database_busy
from apps.core.errors import ServiceError
from apps.core.inputs import bad_input_from

log = logging.getLogger("kgchat.failures")


class InternalError(ServiceError):
    """internal error"""

    status = 500
    code = "internal_error"


def error_classify(exc: BaseException, *, where: str) -> ServiceError:
    """The ``ServiceError`` to answer for ``exc``, raised while serving ``where`` (e.g.
    ``"POST /api/chat/stream"``, ``"websocket chat.message"``, ``"MCP tool hybrid_search"``).

    Logs what is not the client's doing: a busy database as a warning, a bug with its traceback.
    """
    if isinstance(exc, ServiceError):
        return exc
    if is_database_busy(exc):
        log.warning("database busy in %s: %s", where, exc)
        return DatabaseBusy()
    bad_input = bad_input_from(exc)
    if bad_input is not None:
        log.warning("refused input the checks missed in %s: %s", where, exc)
        return bad_input
    log.error("unexpected error in %s", where, exc_info=exc)
    return InternalError()

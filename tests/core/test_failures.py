"""One error classifier for every transport (issue #23 item 4): REST, SSE, the websocket, a running
turn and MCP answer the same ``code`` for the same unexpected failure. The MCP copy once answered
"internal error" where the others said ``database_busy``."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
from django.core.exceptions import (
    BadRequest,
    RequestDataTooBig,
    SuspiciousFileOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.db import DataError, OperationalError
from django.http import UnreadablePostError
from django.http.multipartparser import MultiPartParserError
from psycopg_pool import PoolTimeout

from apps.core.errors import NotFound
from apps.core.failures import error_classify
from apps.graph_tools import mcp_server
from apps.graph_tools.mcp_server import GraphMCPServer

ROOT = Path(__file__).resolve().parents[2]
TRANSPORTS = [
    "config/api.py",
    "apps/chat/transports/consumers.py",
    "apps/graph_tools/mcp_server.py",
    "apps/chat/turns/service.py",
]


def busy_error() -> OperationalError:
    """What Django raises when the pool lent no connection within its timeout."""
    try:
        raise OperationalError("couldn't get a connection after 10.00 sec") from PoolTimeout("timeout")
    except OperationalError as exc:
        return exc


def test_a_service_error_is_answered_as_itself():
    refused = NotFound("no such thing", code="thing_not_found")

    assert error_classify(refused, where="test") is refused


def test_a_pool_without_a_connection_to_give_is_database_busy_503(caplog):
    failure = error_classify(busy_error(), where="test")

    assert (failure.status, failure.code) == (503, "database_busy")
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


def test_a_value_the_database_refused_is_the_clients_400():
    failure = error_classify(DataError("invalid byte sequence for encoding UTF8: 0x00"), where="test")

    assert (failure.status, failure.code) == (400, "invalid_request")


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (
            RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE."),
            413,
            "payload_too_large",
        ),
        (TooManyFieldsSent("The number of GET/POST parameters exceeded"), 400, "invalid_request"),
        (TooManyFilesSent("The number of files exceeded"), 400, "invalid_request"),
        (MultiPartParserError("Request max total header size exceeded."), 400, "invalid_request"),
        (MultiPartParserError("Could not decode base64 data."), 400, "invalid_request"),
        (UnreadablePostError("connection reset"), 400, "invalid_request"),
        (SuspiciousFileOperation("Detected path traversal attempt"), 400, "invalid_request"),
        (BadRequest("malformed"), 400, "invalid_request"),
    ],
)
def test_a_request_django_refused_for_its_size_or_shape_is_the_clients_4xx(exc, status, code, caplog):
    failure = error_classify(exc, where="POST /api/x")

    assert (failure.status, failure.code) == (status, code)
    assert failure.message and "Traceback" not in failure.message
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


def test_anything_else_is_internal_error_500_logged_with_its_traceback(caplog):
    failure = error_classify(KeyError("oops"), where="GET /api/x")

    assert (failure.status, failure.code, failure.message) == (500, "internal_error", "internal error")
    assert caplog.records[-1].exc_info is not None and "GET /api/x" in caplog.records[-1].getMessage()


async def test_an_mcp_tool_call_on_a_busy_database_says_database_busy(monkeypatch):
    async def busy(**kwargs):
        raise busy_error()

    monkeypatch.setattr(mcp_server, "tool_call_direct", busy)

    result = await GraphMCPServer(project_id=uuid.uuid4()).call_tool("list_entity_types", {})

    assert result.is_error
    assert result.structured_content == {
        "error": "the database is busy; try again shortly",
        "code": "database_busy",
    }


async def test_an_mcp_tool_call_that_fails_unexpectedly_says_internal_error(monkeypatch):
    async def broken(**kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(mcp_server, "tool_call_direct", broken)

    result = await GraphMCPServer(project_id=uuid.uuid4()).call_tool("list_entity_types", {})

    assert result.is_error and result.structured_content["code"] == "internal_error"
    assert "a bug" not in result.content[0].text


@pytest.mark.parametrize("path", TRANSPORTS)
def test_no_transport_classifies_errors_on_its_own(path):
    source = (ROOT / path).read_text()

    assert "error_classify(" in source
    assert "bad_input_from(" not in source
    assert "is_database_busy(exc)" not in source


def test_a_busy_database_is_named_by_the_classifier_alone():
    """Issue #49 item 3: no service turns a busy database into ``DatabaseBusy`` on its own (the
    admission and the turn service once did, for a ``DatabaseError`` only); ``error_classify``
    names it for every transport and every way a turn ends."""
    naming = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "apps").rglob("*.py")
        if "DatabaseBusy()" in path.read_text()
    )

    assert naming == ["apps/core/failures.py"]

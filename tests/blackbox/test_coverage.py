"""Nothing a client can call goes untested: every operation of the server's ``/api/openapi.json``,
every error code docs/protocol.md documents for it, every websocket message type of §4 and the
MCP requests have a black-box test that says so with ``@covers`` (read from the test files'
source, see ``covers.py``)."""

from __future__ import annotations

from tests.blackbox.covers import declared
from tests.blackbox.protocol import METHODS, route_refusals, shape, websocket_types
from tests.blackbox.shapes import OpenApi

# Refusals the doc states in prose rather than as "`NNN code`" (which protocol.route_refusals reads).
IN_PROSE = {
    "GET /api/projects/{}": {"404 project_not_found"},  # §1: outside my projects
    "POST /api/projects/{}/graph/import": {"413", "403 forbidden"},
    "POST /api/projects/{}/graph/tools/{}": {"404 entity_not_found", "404 unknown_tool"},
    "POST /api/invitations/accept": {
        "404 invitation_not_found",
        "404 invitation_used",
        "404 invitation_revoked",
        "404 invitation_expired",
        "403",
    },
    "POST /api/chat/stream": {"404 conversation_not_found", "409 approval_pending"},
    "PATCH /api/projects/{}/members/{}": {"409 last_owner"},
    "POST /api/approvals/{}/decision": {"404 approval_not_found"},
}
# Documented, and not covered, with the reason.
NOT_COVERED = {
    ("POST /api/invitations/accept", "404 invitation_expired"): "an invitation lives at least an hour "
    "(expiresInHours 1-8760) and a black-box test cannot move the server's clock",
    ("POST /api/projects/{}/documents", "503 ocr_unavailable"): "the server `make run` starts has its OCR "
    "engine (make run installs it); tests/documents/test_formats.py takes it off the PATH",
}
WEBSOCKET = "WS "
OTHER_SURFACES = {
    "WS connect": {"4401"},
    "MCP tools/list": {"tools"},
    "MCP tools/call": {"result", "isError"},
    "MCP initialize": {"401"},
    "MCP GET": {"405"},
    "PAGE /chat/": {
        "log in",
        "ask",
        "tool chip",
        "tokens",
        "reload",
        "send as the page opens",
        "send while reconnecting",
        "send lost in a closing socket",
        "decision lost in a closing socket",
        "a /v1 thread",
    },
    "PAGE /projects/{}/documents/{}/mentions": {"upload", "names", "candidate", "entity link", "escaped"},
    # The OpenAI-compatible endpoint (docs/protocol.md §8), through the official openai package.
    "V1 GET /v1/models": {"200", "only the token's projects"},
    "V1 POST /v1/chat/completions": {
        "200",
        "200 stream",
        "cited",
        "reasoning",
        "usage",
        "follow-up",
        "approve",
        "401 invalid_api_key",
        "404 model_not_found",
        "400 invalid_request",
    },
}


def documented_errors() -> dict[tuple[str, ...], set[str]]:
    """The refusals of docs/protocol.md §2, by route row, with those written in prose."""
    found = route_refusals()
    for operation, outcomes in IN_PROSE.items():
        found.setdefault((operation,), set()).update(outcomes)
    return found


def test_every_operation_error_code_and_message_type_has_a_black_box_test(openapi: OpenApi) -> None:
    covered = {
        (shape(op) if op.split(" ", 1)[0] in METHODS.split("|") else op): outcomes
        for op, outcomes in declared().items()
    }
    operations = {shape(op) for op in openapi.operations()}
    documented_types = websocket_types()

    unknown = set(covered) - operations - {WEBSOCKET + t for t in documented_types} - set(OTHER_SURFACES)
    untested = sorted(op for op in operations if not any(o.startswith("2") for o in covered.get(op, ())))
    missing_codes = sorted(
        f"{' | '.join(ops)}: {code}"
        for ops, codes in documented_errors().items()
        for code in codes
        if not any(code in covered.get(op, set()) for op in ops)
        and not any((op, code) in {(shape(a), b) for a, b in NOT_COVERED} for op in ops)
    )
    missing_messages = sorted(
        t for t in documented_types if "frames" not in covered.get(WEBSOCKET + t, set())
    )
    missing_other = sorted(
        f"{s}: {o}" for s, outcomes in OTHER_SURFACES.items() for o in outcomes - covered.get(s, set())
    )

    assert documented_types == {"chat.message", "chat.cancel", "chat.subscribe", "chat.approval"}
    assert len(operations) == len(openapi.operations())
    assert not unknown, f"@covers names what the server does not offer: {sorted(unknown)}"
    assert not untested, f"operations without a black-box test of a success: {untested}"
    assert not missing_codes, "documented refusals without a black-box test:\n" + "\n".join(missing_codes)
    assert not missing_messages, f"websocket messages without a black-box test: {missing_messages}"
    assert not missing_other, f"not covered: {missing_other}"

"""Nothing a client can call goes untested: every operation of the server's ``/api/openapi.json``,
every error code docs/protocol.md documents for it, every websocket message type of §4 and the
MCP requests have a black-box test that says so with ``@covers`` (read from the test files'
source, see ``covers.py``)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.blackbox.covers import declared
from tests.blackbox.shapes import OpenApi

PROTOCOL = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
METHODS = r"GET|POST|PUT|PATCH|DELETE"
ROUTE = re.compile(rf"`((?:{METHODS})(?:, (?:{METHODS}))*) (/api/[^ ?`]+)")
STATUS_CODE = re.compile(r"`(\d{3}) ([a-z_]+)")

# Refusals the doc states in prose rather than as "`NNN code`" (the regex above misses them).
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
}
WEBSOCKET = "WS "
OTHER_SURFACES = {
    "WS connect": {"4401"},
    "MCP tools/list": {"tools"},
    "MCP tools/call": {"result", "isError"},
    "MCP initialize": {"401"},
    "PAGE /chat/": {"log in", "ask", "tool chip", "tokens", "reload"},
}


def shape(path: str) -> str:
    """A path with its parameters blanked: ``/api/x/{projectId}`` and ``/api/x/{project_id}`` meet."""
    return re.sub(r"\{[^}]+\}", "{}", path)


def documented_errors() -> dict[tuple[str, ...], set[str]]:
    """docs/protocol.md §2: for each row of the route table (its operations), the "`NNN code`"
    refusals it names; the StreamRequest section's belong to ``POST /api/chat/stream``."""
    text = PROTOCOL.read_text()
    rest = text[text.index("## 2. REST") : text.index("## 3. Frames")]
    found: dict[tuple[str, ...], set[str]] = {}
    for line in rest.splitlines():
        if not line.startswith("| `"):
            continue
        cells = re.split(r"(?<!\\)\|", line)
        route = ROUTE.match(cells[1].strip())
        assert route, f"a route row the coverage test cannot read: {line[:100]}"
        operations = tuple(f"{m} {shape(route.group(2))}" for m in route.group(1).split(", "))
        found[operations] = {f"{s} {c}" for s, c in STATUS_CODE.findall(cells[2])}
    stream = rest[rest.index("### StreamRequest") :]
    found[("POST /api/chat/stream",)] = {f"{s} {c}" for s, c in STATUS_CODE.findall(stream)}
    for operation, outcomes in IN_PROSE.items():
        found.setdefault((operation,), set()).update(outcomes)
    return found


def documented_websocket_types() -> set[str]:
    text = PROTOCOL.read_text()
    section = text[text.index("## 4. Websocket") : text.index("## 5. ")]
    return set(re.findall(r'`\{"type": "(chat\.\w+)"', section))


def test_every_operation_error_code_and_message_type_has_a_black_box_test(openapi: OpenApi) -> None:
    covered = {
        (shape(op) if op.split(" ", 1)[0] in METHODS.split("|") else op): outcomes
        for op, outcomes in declared().items()
    }
    operations = {shape(op) for op in openapi.operations()}
    websocket_types = documented_websocket_types()

    unknown = set(covered) - operations - {WEBSOCKET + t for t in websocket_types} - set(OTHER_SURFACES)
    untested = sorted(op for op in operations if not any(o.startswith("2") for o in covered.get(op, ())))
    missing_codes = sorted(
        f"{' | '.join(ops)}: {code}"
        for ops, codes in documented_errors().items()
        for code in codes
        if not any(code in covered.get(op, set()) for op in ops)
        and not any((op, code) in {(shape(a), b) for a, b in NOT_COVERED} for op in ops)
    )
    missing_messages = sorted(t for t in websocket_types if "frames" not in covered.get(WEBSOCKET + t, set()))
    missing_other = sorted(
        f"{s}: {o}" for s, outcomes in OTHER_SURFACES.items() for o in outcomes - covered.get(s, set())
    )

    assert websocket_types == {"chat.message", "chat.cancel", "chat.subscribe", "chat.approval"}
    assert len(operations) == len(openapi.operations())
    assert not unknown, f"@covers names what the server does not offer: {sorted(unknown)}"
    assert not untested, f"operations without a black-box test of a success: {untested}"
    assert not missing_codes, "documented refusals without a black-box test:\n" + "\n".join(missing_codes)
    assert not missing_messages, f"websocket messages without a black-box test: {missing_messages}"
    assert not missing_other, f"not covered: {missing_other}"

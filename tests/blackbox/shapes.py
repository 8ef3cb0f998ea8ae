"""What every answer must look like: docs/protocol.md's shapes, checked on everything received.

- REST bodies against the server's own ``/api/openapi.json`` (its response schema for the
  status), read strictly: every property an object schema lists must be present (ninja always
  sends every field of a response model; the doc lists them all), formats (uuid, date-time) checked.
- Error bodies: ``{"error", "code"}`` plus only the extras the doc names.
- Stream frames (§3) and websocket events (§4): one small schema per type, written from the doc,
  and the order of a turn: ``meta`` first with ``seq`` 1, ``seq`` without gaps, ``done`` last,
  an ``error`` only right before ``done``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

FORMATS = Draft202012Validator.FORMAT_CHECKER
UUID = {"type": "string", "format": "uuid"}
NULLABLE_UUID = {"anyOf": [UUID, {"type": "null"}]}

ERROR_BODY = {
    "type": "object",
    "required": ["error", "code"],
    "properties": {
        "error": {"type": "string", "minLength": 1},
        "code": {"type": "string", "pattern": "^[a-z_]+$"},
        # The extras docs/protocol.md names: validation details, the offending field, argument or
        # import line, the role a refused write needs, the change set in review a merge waits in.
        "details": {"type": "array"},
        "field": {"type": "string"},
        "argument": {"type": "string"},
        "line": {"type": "integer"},
        "requiredRole": {"enum": ["owner", "editor", "viewer"]},
        "changeSetId": UUID,
    },
    "additionalProperties": False,
}


def _frame(kind: str, fields: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    properties = {"seq": {"type": "integer", "minimum": 1}, "type": {"const": kind}, **fields}
    return {
        "type": "object",
        "required": ["seq", "type", *(required if required is not None else fields)],
        "properties": properties,
        "additionalProperties": False,
    }


CITATION = {
    "type": "object",
    "required": ["id", "key", "type", "name"],
    "properties": {
        "id": UUID,
        "key": {"type": "string"},
        "type": {"type": "string"},
        "name": {"type": "string"},
    },
    "additionalProperties": False,
}

# docs/protocol.md §3, frame by frame.
FRAMES: dict[str, dict[str, Any]] = {
    "meta": _frame(
        "meta",
        {
            "conversationId": UUID,
            "messageId": UUID,
            "agentDefinitionId": NULLABLE_UUID,
            "runId": NULLABLE_UUID,
            "model": {"type": "string", "minLength": 1},
        },
    ),
    "token": _frame("token", {"token": {"type": "string"}}),
    "mcp_tool": {
        **_frame(
            "mcp_tool",
            {
                "tool": {"type": "string", "minLength": 1},
                "callId": {"type": "string", "minLength": 1},
                "status": {"enum": ["started", "completed", "error"]},
                "input": {"type": "object"},
                "result": {},
                "error": {"type": "string"},
            },
            required=["tool", "callId", "status"],
        ),
        # input on started, result on completed, error on error: exactly one of them.
        "oneOf": [
            {
                "properties": {"status": {"const": "started"}},
                "required": ["input"],
                "not": {"anyOf": [{"required": ["result"]}, {"required": ["error"]}]},
            },
            {
                "properties": {"status": {"const": "completed"}},
                "required": ["result"],
                "not": {"anyOf": [{"required": ["input"]}, {"required": ["error"]}]},
            },
            {
                "properties": {"status": {"const": "error"}},
                "required": ["error"],
                "not": {"anyOf": [{"required": ["input"]}, {"required": ["result"]}]},
            },
        ],
    },
    "error": _frame(
        "error",
        {"error": {"type": "string", "minLength": 1}, "code": {"type": "string", "pattern": "^[a-z_]+$"}},
    ),
    "approval_required": _frame(
        "approval_required",
        {
            "approvalId": UUID,
            "tool": {"type": "string"},
            "callId": {"type": "string"},
            "arguments": {"type": "object"},
            "diff": {
                "type": "object",
                "required": ["summary", "changes", "before", "after"],
                "properties": {"summary": {"type": "string"}, "changes": {"type": "array"}},
            },
            "expiresAt": {"type": "string", "format": "date-time"},
            "canDecide": {"type": "boolean"},
        },
    ),
    "done": _frame(
        "done",
        {
            "messageId": NULLABLE_UUID,
            "runId": NULLABLE_UUID,
            "citations": {"type": "array", "items": CITATION},
        },
    ),
}

# §4: errors about a request (not part of a turn: no seq) and conversation events.
REQUEST_ERROR = {
    "type": "object",
    "required": ["type", "error", "code"],
    "properties": {
        "type": {"const": "error"},
        "error": {"type": "string", "minLength": 1},
        "code": {"type": "string"},
    },
    "additionalProperties": False,
}
APPROVAL_DECIDED = {
    "type": "object",
    "required": [
        "type",
        "approvalId",
        "conversationId",
        "callId",
        "status",
        "decidedBy",
        "reason",
        "result",
        "continued",
    ],
    "properties": {
        "type": {"const": "approval_decided"},
        "approvalId": UUID,
        "conversationId": NULLABLE_UUID,
        "callId": {"type": "string"},
        "status": {"enum": ["approved", "rejected", "expired"]},
        "decidedBy": {"type": ["string", "null"]},
        "reason": {"type": "string"},
        "result": {},
        "continued": {"type": "boolean"},
    },
    "additionalProperties": False,
}


def validate(instance: Any, schema: dict[str, Any]) -> None:
    """Raise AssertionError naming every place ``instance`` breaks ``schema``."""
    problems = sorted(Draft202012Validator(schema, format_checker=FORMATS).iter_errors(instance), key=str)
    assert not problems, (
        "\n".join(f"{'/'.join(map(str, p.absolute_path))}: {p.message}" for p in problems)
        + f"\nin {instance!r}"[:2000]
    )


def check_error_body(body: Any) -> None:
    validate(body, ERROR_BODY)


def check_frame(frame: dict[str, Any]) -> None:
    kind = frame.get("type")
    assert kind in FRAMES, f"unknown frame type {kind!r}: {frame}"
    validate(frame, FRAMES[kind])


def check_event(event: dict[str, Any]) -> None:
    """A websocket message that is not a turn's frame: a request error or a conversation event."""
    validate(event, REQUEST_ERROR if event.get("type") == "error" else APPROVAL_DECIDED)


@dataclass
class Turn:
    """The frames of one turn, checked; with what a client reads from them."""

    frames: list[dict[str, Any]]
    meta: dict[str, Any] = field(init=False)
    done: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        check_turn(self.frames)
        self.meta, self.done = self.frames[0], self.frames[-1]

    @property
    def text(self) -> str:
        return "".join(f["token"] for f in self.frames if f["type"] == "token")

    @property
    def error(self) -> dict[str, Any] | None:
        errors = [f for f in self.frames if f["type"] == "error"]
        return errors[0] if errors else None

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f["type"] == kind]


def check_turn(frames: list[dict[str, Any]], *, first_seq: int = 1) -> None:
    """§3's order: ``meta`` first (unless replayed from ``first_seq`` > 1), ``seq`` without gaps,
    ``done`` last and only there, ``error`` at most once and right before ``done``."""
    assert frames, "no frame"
    for frame in frames:
        check_frame(frame)
    seqs = [f["seq"] for f in frames]
    assert seqs == list(range(first_seq, first_seq + len(frames))), f"seq out of order: {seqs}"
    kinds = [f["type"] for f in frames]
    if first_seq == 1:
        assert kinds[0] == "meta", kinds
    assert kinds.count("meta") == (1 if first_seq == 1 else 0), kinds
    assert kinds[-1] == "done" and kinds.count("done") == 1, kinds
    assert kinds.count("error") <= 1, kinds
    if "error" in kinds:
        assert kinds.index("error") == len(kinds) - 2, f"an error not right before done: {kinds}"


class OpenApi:
    """The server's ``/api/openapi.json``: its operations and the schema of each answer."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.components = _strict(copy.deepcopy(document.get("components", {})))

    def operations(self) -> set[str]:
        return {
            f"{method.upper()} {path}"
            for path, item in self.document["paths"].items()
            for method in item
            if method in {"get", "post", "put", "patch", "delete"}
        }

    def response_schema(self, operation: str, status: int) -> dict[str, Any] | None:
        method, path = operation.split(" ", 1)
        responses = self.document["paths"][path][method.lower()]["responses"]
        assert str(status) in responses, (
            f"{operation} answered {status}, not documented in /api/openapi.json ({sorted(responses)})"
        )
        content = responses[str(status)].get("content") or {}
        schema = (content.get("application/json") or {}).get("schema")
        if schema is None:
            return None
        return {**_strict(copy.deepcopy(schema)), "components": self.components}

    def check(self, operation: str, status: int, body: Any) -> None:
        schema = self.response_schema(operation, status)
        if schema is not None:
            validate(body, schema)


def _strict(schema: Any) -> Any:
    """Every property an object schema lists becomes required."""
    if isinstance(schema, dict):
        if isinstance(schema.get("properties"), dict):
            schema["required"] = sorted(set(schema.get("required", [])) | set(schema["properties"]))
        for value in schema.values():
            _strict(value)
    elif isinstance(schema, list):
        for value in schema:
            _strict(value)
    return schema

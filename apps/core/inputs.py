"""The input boundary: values PostgreSQL cannot store, or that would exhaust a parser, are refused here.

Every transport runs what a client (or a model) sends through ``input_check`` or ``json_parse``
before a service stores or queries it, and maps ``InvalidInput`` once (400 ``invalid_request``
naming the field, an ``error`` frame, an MCP ``isError`` result, a tool error result):

- a NUL character: PostgreSQL ``text`` cannot hold it and ``jsonb`` refuses ``\\u0000``;
- an unpaired surrogate (``"\\ud800"``, legal in JSON escapes): it cannot be encoded to UTF-8;
- JSON nested deeper than ``MAX_JSON_DEPTH``: Python's parser raises ``RecursionError`` long
  before a real document gets there, and so would every function that walks the value;
- a number that is not finite: Python's parser reads ``NaN``, ``Infinity`` and ``-Infinity``, and
  a literal beyond the double range (``1e999``) as infinity, and PostgreSQL's ``jsonb`` refuses
  them all (issue #47).

One walk (``input_problem``) finds all of these, so every boundary refuses the same values: the
REST body parser, the websocket, import lines, MCP and a model's tool arguments (``validate_arguments``),
agent definitions, and the admin's JSON fields (``JSONFormField``).

``bad_input_from`` is the last resort: it recognises the database and codec errors such a value
causes if one slips past the checks, so a transport answers 400 instead of 500.
"""

from __future__ import annotations

import json
import math
import re
from typing import Annotated, Any

from django import forms
from django.db import DataError, OperationalError
from pydantic import Field

from apps.core.errors import ServiceError

MAX_JSON_DEPTH = 64

# Lists are paged with ``limit``/``offset``; positions beyond this are refused (PostgreSQL's bigint
# would overflow at 2**63, and no list here comes near a billion rows). A ``limit`` in range is
# then clamped by each route to its page size.
MAX_LIST_POSITION = 1_000_000_000
ListLimit = Annotated[
    int, Field(ge=0, le=MAX_LIST_POSITION, description="How many items (clamped to the page size).")
]
ListOffset = Annotated[int, Field(ge=0, le=MAX_LIST_POSITION, description="How many items to skip.")]

NUL_PROBLEM = "contains a NUL character (\\u0000), which cannot be stored"
SURROGATE_PROBLEM = "contains an unpaired surrogate (such as \\ud800), which is not valid Unicode"
TOO_DEEP_PROBLEM = f"is nested more than {MAX_JSON_DEPTH} levels deep"
NON_FINITE_PROBLEM = (
    "is not a finite number (NaN, Infinity, or too large for a double, such as 1e999), which cannot be stored"
)


class InvalidInput(ServiceError):
    """invalid input"""

    code = "invalid_request"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.field = field

    @property
    def extra(self) -> dict[str, str]:
        """Extra keys of the REST error body: the field at fault, when known."""
        return {"field": self.field} if self.field else {}


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as PostgreSQL text, or None when it can."""
    if "\x00" in value:
        return NUL_PROBLEM
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return SURROGATE_PROBLEM
    return None


def _join(path: str, part: object) -> str:
    return f"{path}.{part}" if path else str(part)


def input_problem(value: object, *, field: str = "") -> tuple[str, str] | None:
    """The first (path, problem) of a JSON-like value: unstorable text in a key or string, a number
    that is not finite, or nesting too deep.

    Walks without recursion, so a value nested 10,000 deep is measured, not a crash.
    """
    stack: list[tuple[object, str, int]] = [(value, field, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return path, problem
        elif isinstance(item, float):
            if not math.isfinite(item):
                return path, NON_FINITE_PROBLEM
        elif isinstance(item, dict | list | tuple):
            if depth >= MAX_JSON_DEPTH:
                return path, TOO_DEEP_PROBLEM
            if isinstance(item, dict):
                for key, child in item.items():
                    key_problem = text_problem(key) if isinstance(key, str) else None
                    if key_problem:
                        return path, f"has a key that {key_problem}"
                    stack.append((child, _join(path, key), depth + 1))
            else:
                stack.extend((child, _join(path, n), depth + 1) for n, child in enumerate(item))
    return None


def input_check(value: object, *, field: str = "", code: str | None = None) -> None:
    """Raise ``InvalidInput`` naming the field when ``value`` holds something that cannot be stored."""
    found = input_problem(value, field=field)
    if found is not None:
        path, problem = found
        raise InvalidInput(f"{path or 'the request'} {problem}", field=path or None, code=code)


class _NotFinite(Exception):
    """A number that is not finite, met while parsing: ``json_parse`` then walks to name where."""


def _not_finite(constant: str) -> float:
    raise _NotFinite(constant)


def _finite_float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):  # a literal beyond the double range, such as 1e999
        raise _NotFinite(literal)
    return value


# One decoder for every document (``json.loads`` with hooks would build one per call).
_FINITE_DECODER = json.JSONDecoder(parse_constant=_not_finite, parse_float=_finite_float)


def _finite_loads(data: str | bytes) -> Any:
    """``json.loads`` refusing a number that is not finite (``_NotFinite``)."""
    text = data if isinstance(data, str) else data.decode(json.detect_encoding(data), "surrogatepass")
    return _FINITE_DECODER.decode(text)


def json_parse(data: str | bytes, *, field: str = "", code: str | None = None, what: str = "the body") -> Any:
    """Parse a JSON document a client sent and ``input_check`` it; raise ``InvalidInput`` when it fails.

    ``what`` names the document in messages when it has no ``field`` name.
    """
    where = field or what
    try:
        try:
            value, walk = _finite_loads(data), False
        except _NotFinite:  # parsed again as Python reads it, for the walk to name where it is
            value, walk = json.loads(data), True
    except RecursionError:
        raise InvalidInput(f"{where} {TOO_DEEP_PROBLEM}", field=field or None, code=code) from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError (bytes that are not UTF-8)
        raise InvalidInput(f"{where} is invalid JSON ({exc})", field=field or None, code=code) from None
    if walk or _may_hold_a_problem(data):
        input_check(value, field=field, code=code)
    return value


# Parsed JSON can only hold a NUL or a lone surrogate through one of these escapes (a raw NUL in a
# string is invalid JSON, a raw surrogate in bytes is invalid UTF-8), and can only nest as deep as it has
# brackets: a document with neither needs no walk (imports parse every line through here). A number
# that is not finite is met by the parser itself (``_not_finite``, ``_finite_float``).
_RISKY_ESCAPE = r"\\u(?:0000|[dD][89a-fA-F])"
_RISKY_TEXT = re.compile(_RISKY_ESCAPE)
_RISKY_BYTES = re.compile(_RISKY_ESCAPE.encode())


def _may_hold_a_problem(data: str | bytes) -> bool:
    if isinstance(data, bytes):
        brackets = data.count(b"[") + data.count(b"{")
        return brackets > MAX_JSON_DEPTH or _RISKY_BYTES.search(data) is not None
    brackets = data.count("[") + data.count("{")
    # A str may also hold a raw surrogate, which the parser keeps inside a string.
    risky = _RISKY_TEXT.search(data) is not None or text_problem(data) is not None
    return brackets > MAX_JSON_DEPTH or risky


# Messages of PostgreSQL / psycopg errors that only a client's value can cause.
_DATA_ERRORS = (
    ("0x00", NUL_PROBLEM),
    ("unsupported unicode escape sequence", NUL_PROBLEM),
    ("out of range", "holds a number out of range"),
    ("too long", "holds a value that is too long"),
    ("exceeds", "holds a value that is too long"),
    ("invalid input syntax for type json", NON_FINITE_PROBLEM),  # jsonb's refusal of NaN and Infinity
)


def bad_input_from(exc: BaseException) -> InvalidInput | None:
    """The ``InvalidInput`` a transport should answer for ``exc``, when a client's value caused it.

    The last resort behind the checks above: a value that reached the database or the UTF-8 codec
    and was refused there is still the client's mistake, not a server error.
    """
    if isinstance(exc, UnicodeEncodeError) and "surrogate" in str(exc):
        return InvalidInput(f"a value {SURROGATE_PROBLEM}")
    if isinstance(exc, RecursionError):
        return InvalidInput(f"a value {TOO_DEEP_PROBLEM}")
    # PostgreSQL reports a tsvector or index row too large as program_limit_exceeded (SQLSTATE
    # 54000), which Django raises as OperationalError, the class of lost connections too.
    limit_exceeded = getattr(exc.__cause__, "sqlstate", None) == "54000"
    if isinstance(exc, DataError) or (isinstance(exc, OperationalError) and limit_exceeded):
        message = str(exc).lower()
        for needle, problem in _DATA_ERRORS:
            if needle in message:
                return InvalidInput(f"a value {problem}")
    return None


REPLACEMENT = "\ufffd"


def _storable_text(value: str) -> str:
    if text_problem(value) is None:
        return value
    return "".join(REPLACEMENT if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in value)


def _non_finite_spelling(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def storable(value: Any) -> Any:
    """``value`` with every NUL and unpaired surrogate in its strings (and keys) replaced by U+FFFD,
    and every number that is not finite by its JSON spelling as a string (``"NaN"``, ``"Infinity"``).

    For what a model produced (its text, the arguments it passed) on the way into the audit trail
    and the conversation: that is a record of what happened, not a request to refuse.
    """
    if isinstance(value, str):
        return _storable_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return _non_finite_spelling(value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


MAX_SEARCH_CHARS = 1000


def search_text_check(value: str, *, field: str = "q", max_chars: int = MAX_SEARCH_CHARS) -> str:
    """Return a search string stripped of surrounding blanks; refuse it when too long or holding control characters.

    Full-text operators, quotes, ``%`` and ``_`` are ordinary text here: the search parses the
    string as a web search (``websearch_to_tsquery``), which never fails on its syntax.
    """
    input_check(value, field=field)
    if len(value) > max_chars:
        raise InvalidInput(f"{field} is longer than {max_chars} characters", field=field)
    if any((ord(c) < 32 and c not in "\t\n\r") or ord(c) == 127 for c in value):
        raise InvalidInput(f"{field} contains a control character", field=field)
    return value.strip()


class JSONFormField(forms.JSONField):
    """A form's JSON field (the admin's) through the same walk: what ``input_problem`` finds is a
    form error naming where, not a database error when the form is saved."""

    def to_python(self, value: Any) -> Any:
        converted = super().to_python(value)
        found = None if self.disabled else input_problem(converted)
        if found is not None:
            path, problem = found
            raise forms.ValidationError(f"{path or 'the value'} {problem}", code="invalid")
        return converted

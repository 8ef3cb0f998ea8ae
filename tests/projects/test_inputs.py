"""The input boundary's parser (apps.projects.inputs.json_parse): what it refuses and what it lets through.

The transports' tests (tests/test_bad_input.py, tests/chat/test_bad_input.py) prove the findings
end to end; these pin the parser's shortcut (documents without a risky escape or enough brackets
are not walked) to the same answers as a full walk.
"""

import pytest

from apps.projects.inputs import MAX_JSON_DEPTH, InvalidInput, json_parse


@pytest.mark.parametrize(
    "document",
    [
        '{"a": "x\\u0000"}',
        '{"a": "x\\uD800"}',
        '{"a": "x\\udfff y"}',
        '{"a\\u0000": 1}',
        "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
        "[" * 10_000 + "]" * 10_000,
        '"unterminated',
        b'{"a": "\xff"}',
    ],
    ids=[
        "nul",
        "surrogate-upper",
        "low-surrogate",
        "nul-key",
        "too-deep",
        "10000-deep",
        "bad-json",
        "bad-utf8",
    ],
)
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_json_parse_refuses_what_cannot_be_stored_or_parsed(document, as_bytes):
    if as_bytes and isinstance(document, str):
        document = document.encode()

    with pytest.raises(InvalidInput) as refused:
        json_parse(document)

    assert refused.value.code == "invalid_request"


def test_json_parse_refuses_a_raw_surrogate_in_text_the_parser_would_keep():
    with pytest.raises(InvalidInput) as refused:
        json_parse('{"a": "x\ud800"}')

    assert refused.value.field == "a"


@pytest.mark.parametrize(
    ("document", "value"),
    [
        ('{"a": "\\\\u0000"}', {"a": "\\u0000"}),
        ('{"a": "\\ud83d\\ude00 \\u00e9 \\u0001"}', {"a": "\U0001f600 \u00e9 \x01"}),
    ],
    ids=["escaped-backslash", "pair-and-controls"],
)
def test_json_parse_accepts_text_that_only_looks_risky(document, value):
    parsed = json_parse(document.encode())

    assert parsed == value


def test_json_parse_accepts_the_deepest_allowed_nesting():
    document = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH

    parsed = json_parse(document)

    depth = 1
    while parsed:
        parsed, depth = parsed[0], depth + 1
    assert depth == MAX_JSON_DEPTH

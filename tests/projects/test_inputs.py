"""The input boundary's parser (apps.core.inputs.json_parse): what it refuses and what it lets through.

The transports' tests (tests/test_bad_input.py, tests/chat/transports/test_bad_input.py) prove the findings
end to end; these pin the parser's shortcut (documents without a risky escape or enough brackets
are not walked) to the same answers as a full walk.
"""

import pytest
from django.db import DataError, OperationalError, connection, transaction

from apps.core.inputs import MAX_JSON_DEPTH, InvalidInput, bad_input_from, json_parse, storable


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


@pytest.mark.parametrize(
    "number",
    ["NaN", "Infinity", "-Infinity", "1e999", "-1E+400", "0.5e00309", "1" + "0" * 309 + ".0"],
    ids=["nan", "infinity", "minus-infinity", "overflow", "minus-overflow", "padded-exponent", "309-digits"],
)
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_json_parse_refuses_a_number_that_is_not_finite_naming_where(number, as_bytes):
    document = '{"name": "NaN", "properties": {"sizes": [1, ' + number + "]}}"

    with pytest.raises(InvalidInput) as refused:
        json_parse(document.encode() if as_bytes else document)

    assert refused.value.code == "invalid_request"
    assert refused.value.field == "properties.sizes.1"
    assert "not a finite number" in refused.value.message


@pytest.mark.parametrize(
    ("document", "value"),
    [
        ('{"a": "NaN", "b": "Infinity e999"}', {"a": "NaN", "b": "Infinity e999"}),
        ('{"a": 1e308, "b": 1e-999, "c": -2.5E+300}', {"a": 1e308, "b": 0.0, "c": -2.5e300}),
        ('{"a": 1' + "0" * 400 + "}", {"a": 10**400}),
    ],
    ids=["words", "large-and-tiny", "big-integer"],
)
def test_json_parse_accepts_finite_numbers_and_words_that_only_look_non_finite(document, value):
    parsed = json_parse(document)

    assert parsed == value


def test_storable_keeps_a_models_non_finite_number_as_its_json_spelling():
    arguments = {"a": float("nan"), "b": [float("inf"), -float("inf")], "c": 1.5}

    kept = storable(arguments)

    assert kept == {"a": "NaN", "b": ["Infinity", "-Infinity"], "c": 1.5}


def test_json_parse_accepts_the_deepest_allowed_nesting():
    document = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH

    parsed = json_parse(document)

    depth = 1
    while parsed:
        parsed, depth = parsed[0], depth + 1
    assert depth == MAX_JSON_DEPTH


def _database_error(sql: str, params: list[object]) -> BaseException:
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, params)
    except (DataError, OperationalError, UnicodeEncodeError) as exc:
        return exc
    raise AssertionError(f"{sql} did not fail")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("SELECT %s::text", ["a\x00b"]),
        ("SELECT %s::jsonb", ['{"a": "\\u0000"}']),
        ("SELECT %s::text", ["a\ud800"]),
        ("SELECT %s::bigint", ["100000000000000000000"]),
        ("SELECT to_tsvector('simple', %s)", [" ".join(f"w{n:07d}" for n in range(150_000))]),
        ("SELECT %s::jsonb", ['{"a": NaN}']),
    ],
    ids=["nul-text", "nul-jsonb", "surrogate", "bigint", "tsvector", "nan-jsonb"],
)
def test_last_resort_maps_the_databases_refusals_of_client_values_to_invalid_request(sql, params):
    error = _database_error(sql, params)

    mapped = bad_input_from(error)

    assert mapped is not None
    assert mapped.code == "invalid_request" and mapped.status == 400


@pytest.mark.django_db
def test_last_resort_leaves_other_database_errors_as_server_errors():
    error = _database_error("SELECT 1 / %s", [0])

    assert bad_input_from(error) is None

"""Reading and constraining a model's JSON answer, for ``structured.py``: the compact grammar the
offline default (llama.cpp) answers under, its rows read back as objects, an answer cut short read
as far as it goes, and the guard that stops an answer writing one item of a list again and again.

These serve answers whose schema is an object of lists of objects or strings (what extraction
asks); ``structured.json_answer`` is the entry point.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from apps.agents.llm.base import LLMError

log = logging.getLogger("kgchat.structured")

# A list of an answer has at most this many items under the compact grammar (unless asked fewer).
MOST_ITEMS = 50
# A name (or any string) of the answer is at most this many characters under the compact grammar:
# a runaway string stops there instead of at the token cap.
GRAMMAR_STRING_CHARS = 120


def _gbnf_literal(text: str) -> str:
    """A GBNF string literal of ``text``: JSON's escapes are GBNF's, and other characters are UTF-8."""
    return json.dumps(text, ensure_ascii=False)


def _json_text(value: str) -> str:
    """``value`` as the model writes it in the answer: a JSON string, its letters as they are."""
    return json.dumps(value, ensure_ascii=False)


def compact_json_grammar(
    schema: dict[str, Any], *, resume_after: str | None = None, most: int = MOST_ITEMS
) -> str:
    """A GBNF grammar (llama.cpp's) for JSON under ``schema`` with no whitespace at all, and each
    object that is an array's item written as a row: an array of its values in the schema's order
    (``["Fredville","CAPITAL_OF","Freedonia"]``), which ``rows_as_objects`` reads back.

    llama.cpp's own translation of a JSON Schema (``response_format``) lets the model indent, and
    the offline default always does: measured (docs/evals.md), a country's paragraph was answered
    in 647-829 tokens pretty-printed and in 333 written compactly, the answer's tokens being nearly
    all of a passage's time. Rows leave out the keys every item repeated (271-486 answer tokens a
    country in objects). Only what extraction's schema holds is covered:
    objects (every property required, in the schema's order), maps (an object of
    ``additionalProperties``, its keys strings or ``propertyNames``' enum, at most
    ``maxProperties``), arrays (at most ``most`` items), strings and string enums.

    With ``resume_after`` (a key of the schema's top object whose value is an array), the grammar
    is of the rest of an answer cut inside that array after a finished item: the array's close,
    then the top object's other keys as in the whole answer. A list has at most ``most`` items."""
    rules: dict[str, str] = {}

    def rule(node: dict[str, Any], row: bool = False) -> str:
        if "enum" in node:
            body = " | ".join(_gbnf_literal(_json_text(v)) for v in node["enum"])
        elif node.get("type") == "string":
            return "str"
        elif node.get("type") == "array":
            item = rule(node["items"], row=True)
            many = min(most, node.get("maxItems", most))
            body = f'"[" ({item} ("," {item}){{0,{many - 1}}}){_optional(node, "minItems")} "]"'
        elif node.get("type") == "object" and "additionalProperties" in node and not node.get("properties"):
            # A map: keys that are strings (or ``propertyNames``' enum), each with a value of its schema.
            names = node.get("propertyNames", {})
            key = rule(names) if "enum" in names else "str"
            value = rule(node["additionalProperties"])
            most_keys = node.get("maxProperties", most)
            member = f'{key} ":" {value}'
            body = (
                f'"{{" ({member} ("," {member}){{0,{most_keys - 1}}}){_optional(node, "minProperties")} "}}"'
            )
        elif node.get("type") == "object" and row:
            values = [rule(value) for value in node["properties"].values()]
            body = '"[" ' + ' "," '.join(values) + ' "]"' if values else '"[]"'
        elif node.get("type") == "object":
            fields = [
                _gbnf_literal(("{" if i == 0 else ",") + _json_text(key) + ":") + " " + rule(value)
                for i, (key, value) in enumerate(node["properties"].items())
            ]
            body = " ".join(fields) + ' "}"' if fields else '"{}"'
        else:
            raise ValueError(f"no compact grammar for {node!r}")
        name = f"r{len(rules)}"
        rules[name] = body
        return name

    if resume_after is None:
        root = rule(schema)
    else:
        keys = list(schema["properties"])
        rest = [
            _gbnf_literal("," + _json_text(key) + ":") + " " + rule(schema["properties"][key])
            for key in keys[keys.index(resume_after) + 1 :]
        ]
        root = "resume"
        rules[root] = " ".join(['"]"', *rest, '"}"'])
    lines = [f"root ::= {root}"] + [f"{name} ::= {body}" for name, body in rules.items()]
    # A JSON string: any character but a quote, a backslash or a control one, or an escape.
    string = r'str ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt]){1,%d} "\""'
    lines.append(string % GRAMMAR_STRING_CHARS)
    return "\n".join(lines)


def _optional(node: dict[str, Any], least: str) -> str:
    """GBNF's mark of a list or map that may be empty (``minItems`` / ``minProperties`` below 1)."""
    return "" if node.get(least, 0) >= 1 else "?"


def rows_as_objects(value: Any, schema: dict[str, Any]) -> Any:
    """An answer written under ``compact_json_grammar`` as the schema's objects: each row (an
    array's item written as an array of values) becomes the object of its properties. An item
    that is already an object, or a row of the wrong length, is left as it is (the cleaning leaves
    out what it cannot read)."""
    if schema.get("type") == "object" and isinstance(value, dict):
        properties = schema.get("properties", {})
        return {k: rows_as_objects(v, properties[k]) if k in properties else v for k, v in value.items()}
    if schema.get("type") == "array" and isinstance(value, list):
        item = schema.get("items", {})
        keys = list(item.get("properties", {})) if item.get("type") == "object" else []
        return [
            rows_as_objects(dict(zip(keys, v, strict=True)), item)
            if keys and isinstance(v, list) and len(v) == len(keys)
            else rows_as_objects(v, item)
            for v in value
        ]
    return value


def json_in(text: str) -> Any:
    """The JSON object in a model's answer, or as much of one cut short as it finished (``LLMError``:
    none can be read; retryable)."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        if match is None:
            raise json.JSONDecodeError("no JSON object", text, 0)
        return json.loads(match.group(0), object_pairs_hook=_merged)
    except json.JSONDecodeError as exc:
        cut = json_cut_short(text)
        if cut is not None:
            # At temperature 0 a retry writes the same answer again: the items it finished are kept.
            log.warning("the model's answer was cut short (%s); its finished items are kept", exc)
            return cut
        raise LLMError(f"the model's JSON could not be read: {exc}: {text[:200]!r}", retryable=True) from None


def _merged(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object as read from JSON whose keys may come more than once (a map the model wrote a key
    of twice): the values of a repeated key are merged, lists joined and objects merged alike; any
    other value, the last kept."""
    merged: dict[str, Any] = {}
    for key, value in pairs:
        before = merged.get(key)
        if isinstance(before, list) and isinstance(value, list):
            value = before + value
        elif isinstance(before, dict) and isinstance(value, dict):
            value = _merged([*before.items(), *value.items()])
        merged[key] = value
    return merged


def _string_step(char: str, escaped: bool) -> tuple[bool, bool]:
    """One character read inside a JSON string (after an escaping backslash when ``escaped``):
    whether the next is escaped, and whether the string goes on."""
    return (False, True) if escaped else (char == "\\", char != '"')


def json_cut_short(text: str) -> dict[str, Any] | None:
    """An answer cut short (at the token cap, or broken off) read as far as it goes: the longest
    prefix ending after a finished item or an opened list that, with its brackets closed, is a
    JSON object. None when no such prefix is."""
    start = text.find("{")
    if start < 0:
        return None
    closers: list[str] = []
    cuts: list[tuple[int, str]] = []  # (end of the prefix, the brackets that close it)
    in_string = escaped = False
    for i in range(start, len(text)):
        char = text[i]
        if in_string:
            escaped, in_string = _string_step(char, escaped)
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            closers.append("}" if char == "{" else "]")
            if char == "[":
                cuts.append((i + 1, "".join(reversed(closers))))
        elif char in "}]":
            if not closers or closers.pop() != char:
                break
            cuts.append((i + 1, "".join(reversed(closers))))
    for end, closing in reversed(cuts):
        try:
            parsed = json.loads(text[start:end] + closing, object_pairs_hook=_merged)
        except json.JSONDecodeError:
            continue
        if isinstance(parsed, dict):
            return parsed
    return None


# An answer that writes one item of a list again has started over or is looping (the offline default
# now and then writes one entity or relationship again and again until the token cap). In a list
# that others follow, its second time stops the answer there, to be resumed with the next list
# (``extraction_ask``); in the last list, its third (twice is now and then only a slip there, and
# what follows it would be lost).
TIMES_TO_STOP = 2
TIMES_TO_STOP_LAST = 3
# A resumed answer's next list has at most this many items for each item of the lists before it,
# and at least this many.
RESUMED_ITEMS_PER_NAMED = 2
RESUMED_ITEMS_LEAST = 10


class LoopGuard:
    """Reads an answer as it streams and notices when it loops: each finished item of its lists
    (an object or a row inside the top object's arrays, or a list inside a map's map) is counted
    by where it is (the keys above it) and its text. Once one has come ``TIMES_TO_STOP`` times
    (``TIMES_TO_STOP_LAST`` in the list of key ``last``, or anywhere when ``last`` is None), ``cut``
    is the answer before that item's second time (a prefix ending after a finished item) and
    ``inside`` the top object's key whose list it is in."""

    def __init__(self, last: str | None = "") -> None:
        self.last = last
        self.read = 0  # characters read
        self.depth = 0
        self.in_string = self.escaped = False
        self.answer = ""
        self.key: list[str] = []
        self.inside = ""
        self.inner = ""  # the last key read at depth 2 (a map's inner key)
        self.item_start = 0
        self.seen: dict[tuple[str, str, str], list[int]] = {}  # an item: where each time of it started
        self.cut: str | None = None

    def looping(self, delta: str) -> bool:
        """Read ``delta``, the answer's next characters; whether the answer is now looping."""
        self.answer += delta
        for char in delta:
            self.read += 1
            if self.in_string:
                if self.depth in (1, 2):
                    self.key.append(char)
                self.escaped, self.in_string = _string_step(char, self.escaped)
                if not self.in_string and self.depth == 1:
                    self.inside, self.key = "".join(self.key)[:-1], []
                elif not self.in_string and self.depth == 2:
                    self.inner, self.key = "".join(self.key)[:-1], []
                continue
            if char == '"':
                self.in_string = True
            elif char in "{[":
                self.depth += 1
                if self.depth == 2:
                    self.inner = ""
                if self.depth == 3:
                    self.item_start = self.read - 1
            elif char in "}]":
                self.depth -= 1
                if self.depth == 2 and self._counted():
                    return True
        return False

    def _counted(self) -> bool:
        item = (self.inside, self.inner, self.answer[self.item_start : self.read])
        starts = self.seen.setdefault(item, [])
        starts.append(self.item_start)
        last = self.last is None or self.inside == self.last
        if len(starts) < (TIMES_TO_STOP_LAST if last else TIMES_TO_STOP):
            return False
        self.cut = self.answer[: starts[1]].rstrip(",")
        return True

"""The forced first step of a turn: a JSON Schema that lets the model write only a valid call.

The request carries a ``response_format`` JSON Schema that is a ``oneOf`` over the offered tools,
``{"name": <const>, "arguments": <that tool's parameters>}`` (``step_schema``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apps.agents.llm.base import ToolSpec


def _inline_refs(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    if depth > 8:
        return {}
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            return _inline_refs(defs.get(ref.rsplit("/", 1)[-1], {}), defs, depth + 1)
        return {
            k: _inline_refs(v, defs, depth)
            for k, v in node.items()
            if k not in {"$defs", "definitions", "title"}
        }
    if isinstance(node, list):
        return [_inline_refs(v, defs, depth) for v in node]
    return node


def _closed_choice(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        return all(_closed_choice(b) or (isinstance(b, dict) and b.get("type") == "null") for b in branches)
    return "enum" in schema or "const" in schema or schema.get("type") == "boolean"


def arguments_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool's parameter schema for a forced step: self-contained, closed, optional free values left out.

    ``$ref``s are inlined (the schema is nested in another), unknown keys refused. Optional
    arguments are offered only when they are closed choices (an enum such as a direction):
    measured on the demo graph, a small model fills optional filters and limits with guesses
    (``"types": ["country"]``, ``"limit": 1``) that empty or cut the result; the tool's defaults
    are better. A later free-text step may still pass them.
    """
    defs = {**(parameters.get("definitions") or {}), **(parameters.get("$defs") or {})}
    resolved: dict[str, Any] = _inline_refs(parameters, defs)
    required = list(resolved.get("required") or [])
    properties = {
        name: schema
        for name, schema in (resolved.get("properties") or {}).items()
        if name in required or _closed_choice(schema)
    }
    return {**resolved, "type": "object", "properties": properties, "additionalProperties": False}


def blind(tool: ToolSpec) -> bool:
    """Whether a forced call of ``tool`` could only be made without any of its arguments.

    ``arguments_schema`` leaves out optional free values, so ``query_entities`` (all optional) is
    offered as ``{}``: the graph's first 50 entities, whatever was asked. Measured in ``make eval``:
    chosen as a first step, the model answered from that page ("10 countries border Qualumistan").
    """
    declared = tool.parameters.get("properties") or {}
    return bool(declared) and not arguments_schema(tool.parameters)["properties"]


def first_step_tools(tools: Sequence[ToolSpec]) -> list[ToolSpec]:
    """The tools a forced first step offers: all but the blind ones (all of them if that is none)."""
    return [t for t in tools if not blind(t)] or list(tools)


def step_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """The JSON Schema of a forced step: a call of exactly one of ``tools`` with valid arguments."""
    return {
        "oneOf": [
            {
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": arguments_schema(t.parameters)},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
            for t in tools
        ]
    }

"""``@covers``: what a black-box test proves, read statically by ``test_coverage.py``.

    @covers("POST /api/projects", "201", "409 slug_taken")
    def test_...

The first argument names a REST operation as ``/api/openapi.json`` spells it ("METHOD /path"),
a websocket message ("WS chat.message") or an MCP request ("MCP tools/call"); the others are the
outcomes the test checks: a status ("201"), a status and an error code ("409 slug_taken"),
for the websocket and MCP a word ("frames", "error invalid_request", "isError").
Arguments must be string literals: the coverage test reads them from the source, without
importing or running anything.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])
HERE = Path(__file__).resolve().parent


def covers(operation: str, *outcomes: str) -> Callable[[F], F]:
    def mark(test: F) -> F:
        return test

    return mark


def declared() -> dict[str, set[str]]:
    """Every ``@covers`` of ``tests/blackbox/test_*.py``: operation -> outcomes."""
    found: dict[str, set[str]] = {}
    for path in sorted(HERE.glob("test_*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.name.startswith(
                "test_"
            ):
                continue
            for decorator in node.decorator_list:
                if not (isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "covers"):
                    continue
                values = [
                    a.value
                    for a in decorator.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str)
                ]
                assert len(values) == len(decorator.args) >= 2, (
                    f"{path.name}:{decorator.lineno}: @covers needs string literals"
                )
                found.setdefault(values[0], set()).update(values[1:])
    return found

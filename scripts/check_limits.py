"""Fail when a Python file or function is over the project's size limits (issue #49).

The limits held when the second redesign closed and were lost four days later because nothing checked
them; ``make lint`` runs this so they hold. ruff has no rule for a file's or a function's length in
lines (``PLR0915`` counts statements, ``C901`` branches), so this walks each file's ``ast``:

- a file in ``apps/``, ``bench/`` or ``config/`` over 450 lines;
- a function or method there over 80 lines, from its first decorator to its last line;
- a file under ``tests/`` over 600 lines.

Each offender is printed as ``path:line name length`` (the line is the function's, or 1 for a file).
Migrations are left out: Django writes them.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

CODE_DIRS = ("apps", "bench", "config")
TEST_DIRS = ("tests",)
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 80
MAX_TEST_FILE_LINES = 600


@dataclass(frozen=True)
class Offender:
    path: str
    line: int
    name: str
    length: int
    limit: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.name} {self.length}"


def _python_files(root: Path, dirs: Sequence[str]) -> Iterator[Path]:
    for name in dirs:
        top = root / name
        if top.is_file() and top.suffix == ".py":
            yield top
            continue
        for path in sorted(top.rglob("*.py")):
            if "migrations" not in path.relative_to(root).parts:
                yield path


def _functions(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Yield every function and method with its dotted name (``Class.method``, ``outer.inner``)."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield prefix + child.name, child
                yield from walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, prefix + child.name + ".")
            else:
                yield from walk(child, prefix)

    return walk(tree, "")


def _function_length(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return first, (node.end_lineno or node.lineno) - first + 1


def check_file(path: Path, display: str, *, max_file: int, max_function: int | None) -> list[Offender]:
    source = path.read_text(encoding="utf-8")
    offenders: list[Offender] = []
    lines = len(source.splitlines())
    if lines > max_file:
        offenders.append(Offender(display, 1, "<file>", lines, max_file))
    if max_function is None:
        return offenders
    for name, node in _functions(ast.parse(source, filename=display)):
        line, length = _function_length(node)
        if length > max_function:
            offenders.append(Offender(display, line, name, length, max_function))
    return offenders


def limits_offenders(root: Path) -> list[Offender]:
    offenders: list[Offender] = []
    for path in _python_files(root, CODE_DIRS):
        display = str(path.relative_to(root))
        offenders += check_file(path, display, max_file=MAX_FILE_LINES, max_function=MAX_FUNCTION_LINES)
    for path in _python_files(root, TEST_DIRS):
        display = str(path.relative_to(root))
        offenders += check_file(path, display, max_file=MAX_TEST_FILE_LINES, max_function=None)
    return offenders


def main(argv: Sequence[str]) -> int:
    root = Path(argv[0]) if argv else Path.cwd()
    offenders = limits_offenders(root)
    for offender in offenders:
        print(offender)
    if offenders:
        print(
            f"FAIL {len(offenders)} over the limits (files {MAX_FILE_LINES} lines, functions {MAX_FUNCTION_LINES}, test files {MAX_TEST_FILE_LINES})"
        )
        return 1
    print(
        f"ok   no file over {MAX_FILE_LINES} lines, no function over {MAX_FUNCTION_LINES}, no test file over {MAX_TEST_FILE_LINES}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The limits check that make lint runs fails on a long file, function or test file, and passes otherwise."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from check_limits import main


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _function(name: str, lines: int) -> str:
    """A function of exactly ``lines`` lines: its ``def`` and ``lines - 1`` statements."""
    return f"def {name}() -> None:\n" + "    x = 1\n" * (lines - 1)


@pytest.mark.parametrize(
    ("relative", "lines"),
    [("apps/long.py", 451), ("bench/long.py", 451), ("config/long.py", 451), ("tests/test_long.py", 601)],
)
def test_a_file_over_its_limit_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], relative: str, lines: int
) -> None:
    _write(tmp_path, relative, "x = 1\n" * lines)

    code = main([str(tmp_path)])

    assert code == 1
    assert f"{relative}:1 <file> {lines}" in capsys.readouterr().out


def test_an_81_line_function_in_bench_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    method = textwrap.indent(_function("run", 81), "    ")
    _write(tmp_path, "bench/slow.py", _function("ok", 80) + "\n\nclass Bench:\n" + method)

    code = main([str(tmp_path)])

    out = capsys.readouterr().out
    assert code == 1
    assert "bench/slow.py:84 Bench.run 81" in out
    assert " ok " not in out


def test_files_and_functions_at_the_limits_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, "apps/at_limit.py", _function("long", 80) + "x = 1\n" * 370)
    _write(tmp_path, "config/small.py", "x = 1\n")
    _write(tmp_path, "tests/test_at_limit.py", _function("test_long", 200) + "x = 1\n" * 400)
    _write(tmp_path, "apps/x/migrations/0001_initial.py", "x = 1\n" * 1000)

    code = main([str(tmp_path)])

    assert code == 0
    assert capsys.readouterr().out.startswith("ok ")

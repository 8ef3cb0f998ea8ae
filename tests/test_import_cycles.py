"""The import-circle check that make lint runs finds a circle, and apps/ has none."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from check_import_cycles import import_cycles


def test_a_circle_between_two_modules_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circled import b\n")
    (package / "b.py").write_text("def f():\n    from circled import a\n")
    (package / "c.py").write_text("from circled import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    cycles = import_cycles("circled")

    assert cycles == [["circled.a", "circled.b"]]


def test_apps_has_no_import_circle() -> None:
    assert import_cycles("apps") == []

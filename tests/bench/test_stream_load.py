"""``bench.stream_load`` runs on a tiny load and prints its table (figures are not asserted)."""

from __future__ import annotations

import pytest

from bench import stream_load

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]


def test_stream_load_runs_one_and_two_processes_and_prints_every_turn_stored(
    test_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--turns", "3", "--levels", "1,3", "--two-processes", "2", "--first-token", "0.05"]
    argv += ["--rate", "200", "--tokens", "5", "--no-plot"]

    status = stream_load.main(argv)

    out = capsys.readouterr().out
    assert status == 0, out
    assert "errors and lost turns: none" in out
    rows = [
        line.split() for line in out.splitlines() if line.split()[:2] in (["1", "1"], ["3", "1"], ["2", "2"])
    ]
    assert len(rows) == 3, out
    assert all(row[-2:] == ["0", "0"] for row in rows), out
    assert "target: added first-token delay p99 <= 100 ms on one process at 3 turns" in out

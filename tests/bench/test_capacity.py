"""``bench.capacity``: its arrivals are a Poisson process of the asked rate, and a tiny run measures
every turn it sends and prints its table and where each turn's first token went (figures are not
asserted)."""

from __future__ import annotations

import json
import statistics

import pytest

from bench import capacity


def test_arrivals_are_a_poisson_process_of_the_given_rate():
    rate, duration = 8.0, 5000.0

    times = capacity.arrivals(rate, duration, seed=7)

    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    per_second = [0] * int(duration)
    for t in times:
        per_second[int(t)] += 1
    assert times == sorted(times) and 0 < times[0] and times[-1] < duration
    assert abs(len(times) / duration - rate) < 0.05 * rate
    # Exponential gaps: the standard deviation equals the mean; Poisson counts: variance = mean.
    assert abs(statistics.stdev(gaps) / statistics.mean(gaps) - 1) < 0.05
    assert abs(statistics.variance(per_second) / statistics.mean(per_second) - 1) < 0.1
    assert capacity.arrivals(rate, 60, seed=7) == capacity.arrivals(rate, 60, seed=7)
    assert capacity.arrivals(rate, 60, seed=7) != capacity.arrivals(rate, 60, seed=8)


@pytest.mark.django_db(transaction=True)
def test_a_tiny_capacity_run_on_one_process_stores_every_turn_and_prints_the_table_and_its_trace(
    test_database_url: str, capsys: pytest.CaptureFixture[str], tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(capacity, "OUT", tmp_path)
    argv = ["--servers", "kgchat1", "--duration", "2", "--rates", "2", "--tokens", "5"]
    argv += ["--first-token", "0.05", "--rate", "200", "--plot", str(tmp_path / "capacity.png"), "--trace"]

    status = capacity.main(argv)

    out = capsys.readouterr().out
    assert status == 0, out
    (saved,) = tmp_path.glob("capacity-*.json")
    (point,) = json.loads(saved.read_text())["points"]
    assert point["server"] == "kgchat1" and point["rate"] == 2.0
    assert point["turns"] == len(capacity.arrivals(2.0, 2.0)) > 0
    assert (point["errors"], point["lost"]) == (0, 0), out
    assert "highest sustained rate (turns/s):" in out and "kgchat, 1 process" in out
    assert (tmp_path / "capacity.png").is_file()
    # --trace: every turn's way to its first token, lined up with the server's marks.
    assert f"trace, {point['turns']} turns, median ms: to server" in out, out
    assert "slow turn +" in out


@pytest.mark.django_db(transaction=True)
def test_the_measured_admissions_leave_no_claimed_turn_for_the_servers(test_database_url: str) -> None:
    """Admitted and never run, they were taken over by the first server and ran beside its rates."""
    from bench.load import _arrange, _cleanup

    world = _arrange(1)
    try:
        cpu = capacity.admission_cpu(world, count=3)

        assert cpu > 0 and capacity.claimed_turns(str(world[0].id)) == 0
    finally:
        _cleanup(world[0], world[2], world[3])

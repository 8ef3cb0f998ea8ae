"""``bench.first_request`` measures a few turns over both transports and profiles them (figures not asserted)."""

from __future__ import annotations

import pytest

from bench import first_request

pytestmark = pytest.mark.django_db(transaction=True)


def test_first_request_prints_the_delay_per_transport_and_the_profile(
    test_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = first_request.main(["--turns", "4", "--sse", "2", "--profile", "--profile-turns", "2"])

    out = capsys.readouterr().out
    assert status == 0, out
    for transport, kind, count in (
        ("websocket", "new conversation", "2"),
        ("websocket", "follow-up", "2"),
        ("SSE", "new conversation", "1"),
        ("SSE", "follow-up", "1"),
    ):
        assert any(
            line.split()[:1] == [transport] and kind in line and line.split()[len(kind.split()) + 1] == count
            for line in out.splitlines()
        ), out
    assert "errors: 0" in out
    assert "SQL statements per turn:" in out
    assert "top 25 by cumulative" in out

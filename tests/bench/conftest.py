"""The benches' servers are their own processes: they reach the test database through DATABASE_URL."""

from __future__ import annotations

import urllib.parse

import pytest
from django.db import connection


@pytest.fixture
def test_database_url(monkeypatch: pytest.MonkeyPatch) -> str:
    s = connection.settings_dict
    host = urllib.parse.quote(s["HOST"] or "", safe="")
    password = f":{urllib.parse.quote(s['PASSWORD'], safe='')}" if s["PASSWORD"] else ""
    port = f":{s['PORT']}" if s["PORT"] else ""
    url = f"postgresql://{s['USER']}{password}@{host}{port}/{s['NAME']}"
    monkeypatch.setenv("DATABASE_URL", url)
    return url

"""Times in JSON as the REST API writes them everywhere.

A schema's ``datetime`` reaches the client through ninja's renderer, whose encoder is Django's
``DjangoJSONEncoder``: ISO 8601 to the millisecond, UTC as ``Z``. A dict built by hand (a queue's
items, a tool's result) writes its times with ``json_time``, so a client reads one format and the
same instant is the same text whichever route gave it."""

from __future__ import annotations

from datetime import datetime

from django.core.serializers.json import DjangoJSONEncoder

_ENCODER = DjangoJSONEncoder()


def json_time(value: datetime) -> str:
    """Write ``value`` as a schema's ``datetime`` is written (``2026-12-08T01:55:00.123Z``)."""
    text: str = _ENCODER.default(value)
    return text

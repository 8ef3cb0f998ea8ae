import os

from .base import *  # noqa: F403
from .base import DATABASES

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Several test runs may share one server (helpers, CI); a suffix keeps their databases apart.
DATABASES["default"]["TEST"] = {"NAME": "test_kgchat" + os.environ.get("KGCHAT_TEST_DB_SUFFIX", "")}
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}
# Tests start many turns a minute; the rate-limit test sets its own limit.
KGCHAT_TURNS_PER_MINUTE = 0
# Tests assert streams delta by delta; tests/agents/adk/test_model_adapter.py and
# tests/chat/test_stream_coalescing.py turn merging on.
KGCHAT_STREAM_COALESCE_MS = 0

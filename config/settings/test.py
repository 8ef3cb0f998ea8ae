"""The test suite's settings: what `make run` users get (``config.settings.local``), but for the
differences listed in ``DIFFERENCES`` below, each with its reason.

Every other setting, above all the user-facing ones (rate limit, pool sizes and timeouts, turn and
tool timeouts, merging of streamed text, approval and invitation lifetimes, direct writes, upload
and message limits), is the user's default: a test that needs another value sets it itself
(pytest-django's ``settings`` fixture), so the suite runs the configuration people run.
``tests/test_settings_parity.py`` fails on a difference that is not listed here.
"""

import os

from .base import DATABASES
from .local import *  # noqa: F403

# Setting name -> why the test suite cannot run with the user's value.
DIFFERENCES = {
    "PASSWORD_HASHERS": "MD5 hashes the test users' passwords in microseconds, PBKDF2 in ~0.3 s each: "
    "a suite creating thousands of users would take minutes longer; no test is about hash strength",
    "DATABASES": "the test database's NAME gets a suffix (KGCHAT_TEST_DB_SUFFIX) so several runs on one "
    "server (helpers, CI) stay apart; pool sizes and timeouts are the user's",
    "LOGGING": "WARNING instead of INFO: the suite's thousands of turns would write their INFO lines "
    "into every failure report",
}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DATABASES["default"]["TEST"] = {"NAME": "test_kgchat" + os.environ.get("KGCHAT_TEST_DB_SUFFIX", "")}
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}

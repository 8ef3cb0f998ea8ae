"""The suite runs what users run: ``config.settings.test`` differs from ``config.settings.local``
(what `make run` serves with) only where ``config.settings.test.DIFFERENCES`` says why (issue #23).

A turn-rate limit switched off for tests once hid a 500 that every user met on their first plain
question; this test makes such a difference a failure unless it is listed with its reason.
"""

from __future__ import annotations

from typing import Any

from config.settings import local, test

# The user-facing settings the issue names; each must be the user's in tests.
USER_FACING = [
    "KGCHAT_TURNS_PER_MINUTE",
    "KGCHAT_DB_POOL_MAX",
    "KGCHAT_TURN_TIMEOUT_SECONDS",
    "KGCHAT_TOOL_TIMEOUT_SECONDS",
    "KGCHAT_TURN_LEASE_SECONDS",
    "KGCHAT_TURN_MAX_ATTEMPTS",
    "KGCHAT_STREAM_COALESCE_MS",
    "KGCHAT_APPROVAL_TTL_MINUTES",
    "KGCHAT_INVITATION_TTL_HOURS",
    "KGCHAT_DIRECT_WRITES",
    "KGCHAT_IMPORT_MAX_BYTES",
    "KGCHAT_MAX_MESSAGE_CHARS",
    "DATA_UPLOAD_MAX_MEMORY_SIZE",
]


def _settings_of(module: Any) -> dict[str, Any]:
    return {name: getattr(module, name) for name in dir(module) if name.isupper() and name != "DIFFERENCES"}


def _pool_of(settings: dict[str, Any]) -> dict[str, Any]:
    default = settings["DATABASES"]["default"]
    return {key: value for key, value in default.items() if key != "TEST"}


def test_test_settings_differ_from_the_users_only_where_listed_with_a_reason():
    ours, users = _settings_of(test), _settings_of(local)

    differing = {
        name for name in ours.keys() | users.keys() if ours.get(name, object()) != users.get(name, object())
    }

    assert differing <= set(test.DIFFERENCES), (
        f"unlisted differences: {sorted(differing - set(test.DIFFERENCES))}"
    )
    assert all(len(reason) > 20 for reason in test.DIFFERENCES.values())


def test_every_user_facing_setting_is_the_users_in_tests():
    users = local

    for name in USER_FACING:
        assert getattr(test, name) == getattr(users, name), name
        assert name not in test.DIFFERENCES, name


def test_the_database_pool_and_its_timeouts_are_the_users_in_tests():
    ours, users = _settings_of(test), _settings_of(local)

    assert _pool_of(ours) == _pool_of(users)
    assert ours["DATABASES"]["default"]["OPTIONS"]["pool"] == users["DATABASES"]["default"]["OPTIONS"]["pool"]

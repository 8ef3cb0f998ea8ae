"""System checks of settings whose values must agree (``manage.py check``, every server start)."""

from django.core.checks import run_checks


def _lease_errors() -> list[str]:
    return [m.id for m in run_checks() if m.id in {"kgchat.E103", "kgchat.E104"}]


def test_a_turn_lease_too_short_to_renew_is_a_system_check_error(settings):
    settings.KGCHAT_TURN_LEASE_SECONDS = 2

    assert _lease_errors() == ["kgchat.E103"]


def test_a_turn_lease_reaching_half_the_turn_timeout_is_a_system_check_error(settings):
    settings.KGCHAT_TURN_TIMEOUT_SECONDS = 60
    settings.KGCHAT_TURN_LEASE_SECONDS = 31

    assert _lease_errors() == ["kgchat.E103"]


def test_a_turn_with_no_attempt_allowed_is_a_system_check_error(settings):
    settings.KGCHAT_TURN_MAX_ATTEMPTS = 0

    assert _lease_errors() == ["kgchat.E104"]


def test_the_default_lease_settings_pass_the_checks():
    assert _lease_errors() == []

"""System checks of settings whose values must agree (``manage.py check``, every server start)."""

from django.core.checks import run_checks


def _stale_claim_errors() -> list[str]:
    return [m.id for m in run_checks() if m.id == "kgchat.E103"]


def test_a_turn_timeout_reaching_the_stale_claim_time_is_a_system_check_error(settings):
    settings.KGCHAT_TURN_TIMEOUT_SECONDS = 15 * 60

    assert _stale_claim_errors() == ["kgchat.E103"]


def test_the_default_turn_timeout_passes_the_stale_claim_check():
    assert _stale_claim_errors() == []

"""An API token's name is kept whole up to its limit (100) or refused naming the field, never cut
and never a database error's traceback (issue #47 item 10)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from apps.projects.models import ApiToken
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def test_a_token_name_is_kept_whole_up_to_100_characters_and_refused_past_them():
    user = make_user()
    whole = "t" * 100

    call_command("create_api_token", user.username, "--name", whole)
    with pytest.raises(CommandError, match="name: at most 100 characters"):
        call_command("create_api_token", user.username, "--name", whole + "!")

    assert list(ApiToken.objects.filter(user=user).values_list("name", flat=True)) == [whole]

"""Fixtures of the documents' tests."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.factories import make_project, make_user


@pytest.fixture
def editor():
    """A logged-in client of a project's owner, and the project."""
    user = make_user()
    project = make_project(owner=user)
    client = Client()
    client.force_login(user)
    return client, project

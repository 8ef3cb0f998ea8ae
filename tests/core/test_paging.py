"""The one pager of every list route (apps/core/paging.py): docs/protocol.md §2's paging rules."""

import pytest

from apps.core.paging import page_of
from apps.projects.models import Project
from tests.factories import make_project


def test_a_limit_above_the_page_size_is_lowered_to_it():
    page = page_of(list(range(1000)), limit=1_000_000_000, offset=0, size=500)

    assert (len(page.items), page.count) == (500, 1000)


def test_an_offset_past_the_end_gives_an_empty_page_with_the_whole_count():
    page = page_of(list(range(10)), limit=5, offset=1_000_000_000)

    assert (page.items, page.count) == ([], 10)


def test_a_limit_of_zero_gives_only_the_count():
    page = page_of(list(range(10)), limit=0, offset=0)

    assert (page.items, page.count) == ([], 10)


@pytest.mark.django_db
def test_a_queryset_is_sliced_in_the_database_and_counted_whole():
    for _ in range(3):
        make_project()

    page = page_of(Project.objects.order_by("created_at"), limit=2, offset=1)

    assert (len(page.items), page.count) == (2, 3)

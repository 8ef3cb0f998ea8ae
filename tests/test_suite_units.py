"""``make test``'s workers take whole modules, and the black-box and browser packages whole
(``tests/conftest.py``), so module- and package-scoped servers start once."""

from __future__ import annotations

from tests.conftest import work_unit


def test_a_modules_tests_are_one_unit_and_each_shared_server_package_is_one_unit():
    assert work_unit("tests/test_portability.py::test_a") == work_unit("tests/test_portability.py::test_b[x]")
    assert work_unit("tests/test_portability.py::test_a") != work_unit("tests/test_bad_input.py::test_a")
    assert work_unit("tests/blackbox/test_mcp.py::test_a") == work_unit("tests/blackbox/test_approvals.py::t")
    assert work_unit("tests/chat/browser/test_pages.py::t") == work_unit(
        "tests/chat/browser/test_markdown.py::t"
    )
    # A package whose name only starts like one of them is no part of it.
    assert work_unit("tests/chat/browser_restart/test_page_follows_a_restart.py::t") != work_unit(
        "tests/chat/browser/test_pages.py::t"
    )

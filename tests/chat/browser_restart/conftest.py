"""The chat page while the only server process is killed and started again: a package of its own.

Its daphne is a real process started (and killed, and started again) by the test, not the browser
package's forked server, which lives for that package and, like every kgchat process, takes over
the turns whose process died in its database: it would take this test's turn before the restarted
process does. Chromium and its page are the browser package's fixtures.
"""

from tests.chat.browser.conftest import (  # noqa: F401 - fixtures
    _close_connections_of_async_threads,
    browser,
    page,
)

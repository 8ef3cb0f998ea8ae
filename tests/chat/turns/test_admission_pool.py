"""Admission runs on a thread pool of its own; a forked child process (a test's live server, a
preforking server) gets a pool that works, not the parent's bookkeeping of threads it lacks."""

from __future__ import annotations

import os
from concurrent.futures import TimeoutError as FutureTimeout

from apps.chat.turns import admission


def test_a_forked_child_admits_turns_after_the_parent_already_has_admission_threads():
    assert admission.admission_executor().submit(os.getpid).result(timeout=5) == os.getpid()

    child = os.fork()
    if child == 0:  # the child: exit 0 only if the pool runs work
        try:
            code = (
                0 if admission.admission_executor().submit(os.getpid).result(timeout=5) == os.getpid() else 2
            )
        except FutureTimeout:
            code = 1
        os._exit(code)
    _, status = os.waitpid(child, 0)

    assert os.waitstatus_to_exitcode(status) == 0, "the child's admission pool never ran the work"

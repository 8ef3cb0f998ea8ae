"""A real redis-server on a free loopback port, for the tests that need one."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.support import free_port, start_process, wait_ready


@contextmanager
def redis_server() -> Iterator[str]:
    """Start redis-server on 127.0.0.1 with no persistence; yield its URL; stop it."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed: run scripts/system_deps.sh (make test does)")
    port = free_port()
    with tempfile.TemporaryDirectory() as workdir:
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        server = start_process(
            "redis-server",
            [*argv, "--dir", workdir],
            port=port,
            env=os.environ,
            log=Path(workdir) / "redis-server.log",
        )
        try:
            wait_ready(server, timeout=10)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            server.stop(10)

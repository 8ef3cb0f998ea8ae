"""Start ``tests/support/mcp_echo_server.py`` as a child process for a test, and a connection trap."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

ECHO_SERVER = str(Path(__file__).with_name("mcp_echo_server.py"))


def echo_stdio_config() -> dict[str, object]:
    """The operator's ``KGCHAT_MCP_STDIO_SERVERS`` entry that runs the echo server over stdio."""
    return {"command": sys.executable, "args": [ECHO_SERVER, "stdio"]}


@contextmanager
def echo_server(*args: str) -> Iterator[int]:
    """Run the echo server (``http …`` or ``redirect --to …``) on 127.0.0.1; yield its port."""
    process = subprocess.Popen(
        [sys.executable, ECHO_SERVER, *args], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("PORT "), f"echo server did not start: {line!r}"
        yield int(line.split()[1])
    finally:
        process.terminate()
        process.wait(timeout=30)


class Trap:
    """A TCP listener on 127.0.0.1 that counts the connections it gets (it should get none)."""

    def __init__(self) -> None:
        self.connections = 0
        self.port = 0

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.close()


@asynccontextmanager
async def trap() -> AsyncIterator[Trap]:
    t = Trap()
    server = await asyncio.start_server(t._accept, "127.0.0.1", 0)
    t.port = server.sockets[0].getsockname()[1]
    try:
        yield t
    finally:
        server.close()
        await server.wait_closed()

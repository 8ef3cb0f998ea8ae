"""The servers that the benchmarks and the tests both start, in one place.

A free loopback port, a server process with its output in a log file, waiting until it listens
(optionally until a page answers 200), stopping it, and daphne serving an ASGI application. The
benchmarks (``bench.load``, ``bench.vs_adk_server``) and the tests that run real server processes
(``tests/chat/streams/test_multiprocess.py``, ``tests/chat/turns/test_crash_recovery.py``, the redis-server of
``tests/support/redis_server.py``) use these. Not a benchmark itself: it has no ``run()``.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
DAPHNE = Path(sys.executable).parent / "daphne"


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now: any, or the first
    free one of ``BENCH_PORTS`` (``first-last``, e.g. ``8031-8039``) when a shared machine gives
    each user their own ports."""
    given = os.environ.get("BENCH_PORTS", "").strip()
    if given:
        first, _, last = given.partition("-")
        for port in range(int(first), int(last or first) + 1):
            if port not in _TAKEN and not _listens(port):
                _TAKEN.add(port)  # not handed out twice while its server starts
                return port
        raise RuntimeError(f"no free port left in BENCH_PORTS={given}")
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


_TAKEN: set[int] = set()


@dataclass
class ServerProcess:
    """A server started as its own OS process on a loopback port, writing to ``log``."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def http(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def ws(self) -> str:
        """The URL of kgchat's chat websocket on this server."""
        return f"ws://{LOOPBACK}:{self.port}/ws/chat/"

    @property
    def worker(self) -> str:
        """How kgchat names this process (``host:pid``) in ``kb.agent_runs.worker`` and claims."""
        return f"{socket.gethostname()}:{self.process.pid}"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.output().splitlines()[-lines:])

    def stop(self, timeout: float = 20) -> None:
        """Terminate the process (SIGTERM), and kill it if it has not exited after ``timeout`` s."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        _TAKEN.discard(self.port)


def start_process(
    name: str, argv: list[str], *, port: int, env: Mapping[str, str], log: Path, cwd: Path = ROOT
) -> ServerProcess:
    """Start ``argv`` with its stdout and stderr in ``log``; it is to listen on ``port``."""
    with log.open("wb") as out:
        process = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT)
    return ServerProcess(name=name, process=process, port=port, log=log)


def start_daphne(
    name: str,
    *,
    env: Mapping[str, str],
    log: Path,
    application: str = "config.asgi:application",
    port: int | None = None,
    quiet: bool = False,
    options: Sequence[str] = (),
) -> ServerProcess:
    """Start daphne serving ``application`` on loopback (a free port unless given); ``quiet`` is ``-v 0``.

    ``options`` are more daphne options, e.g. ``--proxy-headers`` behind a reverse proxy.
    """
    port = free_port() if port is None else port
    verbosity = ["-v", "0"] if quiet else []
    argv = [str(DAPHNE), *verbosity, *options, "-b", LOOPBACK, "-p", str(port), application]
    return start_process(name, argv, port=port, env=env, log=log)


def _answers_200(port: int, path: str) -> bool:
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=5)
    try:
        connection.request("GET", path)
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def _listens(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex((LOOPBACK, port)) == 0


def wait_ready(server: ServerProcess, *, path: str | None = None, timeout: float = 120) -> None:
    """Wait until ``server`` accepts connections (and ``GET path`` answers 200, if given).

    Raises RuntimeError with the end of the server's log when it exits first or takes longer
    than ``timeout`` seconds (a guard against hanging, not a measured figure).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited before it was ready:\n{server.tail()}")
        if _listens(server.port) and (path is None or _answers_200(server.port, path)):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{server.name} was not ready within {timeout:.0f} s:\n{server.tail()}")


@contextmanager
def redis_server() -> Iterator[tuple[str, int]]:
    """Start redis-server on loopback with no persistence; yield its URL and pid; stop it."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed: run scripts/system_deps.sh (make test does)")
    port = free_port()
    with tempfile.TemporaryDirectory() as workdir:
        argv = [binary, "--port", str(port), "--bind", LOOPBACK, "--save", "", "--appendonly", "no"]
        server = start_process(
            "redis-server",
            [*argv, "--dir", workdir],
            port=port,
            env=os.environ,
            log=Path(workdir) / "redis-server.log",
        )
        try:
            wait_ready(server, timeout=10)
            yield f"redis://{LOOPBACK}:{port}/0", server.process.pid
        finally:
            server.stop(10)


async def ws_turn(
    ws: Any,
    request: Mapping[str, Any],
    result: Any,
    *,
    frame_timeout: float | None = None,
    on_token: Callable[[float, str], None] | None = None,
) -> str:
    """Send one ``chat.message`` on a kgchat websocket and read its frames to the turn's end.

    The conversation's id (``meta``) and each ``error`` go into ``result.conversation_id`` and
    ``result.errors``; ``on_token(arrived, token)`` sees each token as it arrives (perf_counter
    seconds); ``frame_timeout`` bounds the wait for each frame. Returns the answer's text.
    """
    parts: list[str] = []
    await ws.send(json.dumps(request))
    while True:
        raw = await asyncio.wait_for(ws.recv(), frame_timeout)
        arrived = time.perf_counter()
        frame = json.loads(raw)
        kind = frame["type"]
        if kind == "token":
            parts.append(frame["token"])
            if on_token is not None:
                on_token(arrived, frame["token"])
        elif kind == "meta":
            result.conversation_id = frame["conversationId"]
        elif kind == "error":
            result.errors.append(f"{frame.get('code')}: {frame.get('error')}")
            if "seq" not in frame:  # a refusal ends the turn; an error inside it comes before done
                break
        elif kind == "done":
            break
    return "".join(parts)

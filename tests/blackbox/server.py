"""kgchat started exactly as a user starts it: ``make run``, in its own data directory.

``make run`` (the Makefile's recipe, nothing copied from it) makes a fresh embedded PostgreSQL
cluster in ``KGCHAT_DATA_DIR``, migrates, runs ``bootstrap --demo-project demo`` (which prints the
admin login once), ``recover_turns``, starts the embedding worker and serves with daphne under
``config.settings.local``. The child gets a user's environment, not the test run's: no
``DJANGO_SETTINGS_MODULE`` (``make test`` exports the test settings and the Makefile only sets
them with ``?=``), no ``DATABASE_URL``, no ``KGCHAT_*`` tuning, no ``MAKEFLAGS``. Only the model
is chosen: ``openai/test-model`` on the scripted server (``OPENAI_BASE_URL``).

``make -o .venv/.installed`` treats the virtualenv as installed: ``make test`` (whose ``pytest``
runs this) has just installed it, and a test must never ``pip install`` into it.

Stopping: SIGTERM to the process group (make, its recipe shell, the embedding worker and its
model processes, daphne), SIGKILL after a grace period, then ``manage.py embedded_db stop`` with
the same ``KGCHAT_DATA_DIR`` (PostgreSQL runs in its own session), then the directory is removed.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"  # the Makefile's $(PY)
LOOPBACK = "127.0.0.1"
MODEL = "openai/test-model"
# What a user's shell passes on to make: nothing of the test run's own configuration.
USER_ENVIRONMENT = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
ADMIN_LOGIN = re.compile(r"Created the login {2}(\S+) / (\S+) {2}\(shown once\)")
ACCESS_LOG = re.compile(r'^\S+:\d+ - - \[[^]]+\] "')
READY_TIMEOUT = 600  # s: a fresh cluster, the migrations and the demo graph on a busy machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def user_environment(**settings: str) -> dict[str, str]:
    """The environment of a user who runs ``make run`` with ``settings``."""
    env = {name: os.environ[name] for name in USER_ENVIRONMENT if name in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return {**env, **settings}


@dataclass
class Kgchat:
    """One kgchat served by ``make run`` on a loopback port."""

    port: int
    data_dir: Path
    log: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    admin: tuple[str, str] = ("", "")
    stopped: bool = field(default=False)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{LOOPBACK}:{self.port}/ws/chat/"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int = 60) -> str:
        """The end of the output, without daphne's access log lines."""
        kept = [line for line in self.output().splitlines() if not ACCESS_LOG.match(line)]
        return "\n".join(kept[-lines:])

    def manage(self, *args: str, input: str | None = None, env: dict[str, str] | None = None) -> str:
        """Run ``manage.py`` as an operator on this installation (same settings, same database)."""
        done = subprocess.run(
            [str(PYTHON), "manage.py", *args],
            cwd=ROOT,
            env={**self.env, **(env or {})},
            input=input,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"manage.py {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}"
            )
        return done.stdout

    def stop(self) -> None:
        """Stop every process ``make run`` started and the embedded PostgreSQL; remove the data."""
        if self.stopped:
            return
        self.stopped = True
        try:
            _stop_group(self.process)
        finally:
            try:
                subprocess.run(
                    [str(PYTHON), "manage.py", "embedded_db", "stop"],
                    cwd=ROOT,
                    env=self.env,
                    capture_output=True,
                    timeout=120,
                )
            finally:
                shutil.rmtree(self.data_dir, ignore_errors=True)


def _stop_group(process: subprocess.Popen[bytes], grace: float = 30) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    # The worker's model processes may outlive make: whatever is left of the group goes now.
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_alive(process.pid):
        time.sleep(0.2)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if process.poll() is None:
        process.wait(10)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _answers(port: int, path: str) -> int | None:
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=5)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    except OSError:
        return None
    finally:
        connection.close()


def start(model_base_url: str, workdir: Path) -> Kgchat:
    """``make run`` on a free port with a fresh data directory in ``workdir``; wait until it serves."""
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="kgchat-data-", dir=workdir))
    # As root the embedded server runs as its own OS user, which must reach the cluster's directory.
    data_dir.chmod(0o755)
    env = user_environment(
        HOST=LOOPBACK,
        PORT=str(port),
        KGCHAT_DATA_DIR=str(data_dir),
        KGCHAT_MODEL=MODEL,
        OPENAI_BASE_URL=model_base_url,
        OPENAI_API_KEY="test-key",
    )
    log = workdir / "make-run.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["make", "-o", ".venv/.installed", "run"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, stopped as one
        )
    server = Kgchat(port=port, data_dir=data_dir, log=log, env=env, process=process)
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while _answers(port, "/accounts/login/") != 200:
            if process.poll() is not None:
                raise RuntimeError(f"make run exited ({process.returncode}) before serving:\n{server.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"make run did not serve within {READY_TIMEOUT} s:\n{server.tail()}")
            time.sleep(0.25)
        found = ADMIN_LOGIN.search(server.output())
        if found is None:
            raise RuntimeError(f"make run printed no admin login:\n{server.tail()}")
        server.admin = (found.group(1), found.group(2))
    except BaseException:
        server.stop()
        raise
    return server


@dataclass
class Beside:
    """A second server process of the same installation (same environment, same database), as
    an operator runs more than one: daphne on another port. The test may stop or kill it."""

    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def signal(self, number: int) -> None:
        os.kill(self.process.pid, number)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)


def start_beside(kgchat: Kgchat, log: Path) -> Beside:
    """Serve ``kgchat``'s installation from a second daphne process; wait until it serves."""
    port = free_port()
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                str(ROOT / ".venv" / "bin" / "daphne"),
                "-b",
                LOOPBACK,
                "-p",
                str(port),
                "config.asgi:application",
            ],
            cwd=ROOT,
            env=kgchat.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    beside = Beside(port=port, process=process)
    deadline = time.monotonic() + 120
    while _answers(port, "/accounts/login/") != 200:
        if process.poll() is not None or time.monotonic() > deadline:
            beside.kill()
            raise RuntimeError(f"the second daphne did not serve:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.25)
    return beside

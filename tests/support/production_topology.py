"""docker-compose.yml's topology from Debian packages: Caddy in front of two daphne processes.

Debian's ``caddy`` runs ``deploy/Caddyfile`` itself, its environment placeholders pointing at
loopback, in the documented plain-HTTP trial mode (an ``http://`` site address on a free port,
``DJANGO_SECURE_SSL_REDIRECT`` and ``DJANGO_SECURE_COOKIES`` off). Behind it two daphne processes
run as the Dockerfile starts them (``--proxy-headers``, ``config.settings.production``) on the given
database, with a real redis-server as channel layer and frame bus; ``collectstatic`` writes into a
temporary directory that only Caddy serves (production's app processes do not serve ``/static/``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.hashers import PBKDF2PasswordHasher

from bench.support import ServerProcess, free_port, start_daphne, start_process, wait_ready
from tests.support.redis_server import redis_server

CADDY = shutil.which("caddy")
CADDY_MISSING = "Debian's caddy is not installed (scripts/system_deps.sh installs it as root or through sudo)"
ROOT = Path(__file__).resolve().parents[2]


def start_app(name: str, env: dict[str, str], logdir: Path, port: int | None = None) -> ServerProcess:
    """Start app process ``name`` as the Dockerfile does (on ``port``: its old one, to restart it)."""
    log = logdir / f"{name}-{time.monotonic_ns()}.log"
    return start_daphne(name, env=env, log=log, port=port, options=["--proxy-headers"])


def wait_app_ready(server: ServerProcess) -> None:
    wait_ready(server, path="/accounts/login/", timeout=90)


@dataclass
class Topology:
    """Caddy in front of app processes A and B."""

    caddy: ServerProcess
    apps: dict[str, ServerProcess]
    env: dict[str, str]
    logdir: Path

    @property
    def http(self) -> str:
        return self.caddy.http

    @property
    def ws(self) -> str:
        return self.caddy.ws

    def restart(self, server: ServerProcess) -> ServerProcess:
        """Start ``server`` again on its port, as compose's restart policy does."""
        self.apps[server.name] = restarted = start_app(server.name, self.env, self.logdir, server.port)
        wait_app_ready(restarted)
        return restarted

    def worker(self, worker: str) -> ServerProcess:
        """The app process that ``kb.agent_runs.worker`` names."""
        (server,) = [s for s in self.apps.values() if s.worker == worker]
        return server

    def logs(self) -> str:
        """The end of every server's output, to print when a test fails."""
        return "\n".join(
            f"--- {s.name} (pid {s.process.pid}) ---\n{s.output()[-5000:]}"
            for s in [self.caddy, *self.apps.values()]
        )


@contextmanager
def production_topology(*, database_url: str, model: str, llm_base_url: str) -> Iterator[Topology]:
    """Start Redis, two app processes on ``database_url`` serving ``model`` and Caddy; stop them after."""
    if CADDY is None:
        raise RuntimeError(CADDY_MISSING)
    with redis_server() as redis_url, tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.production",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "DJANGO_SECURE_SSL_REDIRECT": "false",
            "DJANGO_SECURE_COOKIES": "false",
            "DJANGO_STATIC_ROOT": str(workdir / "static"),
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "KGCHAT_MODEL": model,
            "OPENAI_BASE_URL": llm_base_url,
            "OPENAI_API_KEY": "test-key",
            "KGCHAT_DB_POOL_MAX": "5",
            "PYTHONUNBUFFERED": "1",
        }
        collect = [sys.executable, "manage.py", "collectstatic", "--noinput"]
        subprocess.run(collect, cwd=ROOT, env=env, check=True, capture_output=True)
        started: list[ServerProcess] = []
        topology: Topology | None = None
        try:
            for name in ("A", "B"):
                started.append(start_app(name, env, workdir))
            for server in started:
                wait_app_ready(server)
            port = free_port()
            caddy_env = {
                **os.environ,
                "HOME": str(workdir),
                "XDG_DATA_HOME": str(workdir / "caddy-data"),
                "XDG_CONFIG_HOME": str(workdir / "caddy-config"),
                "KGCHAT_SITE_ADDRESS": f"http://:{port}",
                "KGCHAT_CADDY_BIND": "127.0.0.1",
                "KGCHAT_CADDY_ADMIN": "off",
                "KGCHAT_STATIC_ROOT": env["DJANGO_STATIC_ROOT"],
                "KGCHAT_APP1": f"127.0.0.1:{started[0].port}",
                "KGCHAT_APP2": f"127.0.0.1:{started[1].port}",
            }
            argv = [CADDY, "run", "--config", str(ROOT / "deploy" / "Caddyfile"), "--adapter", "caddyfile"]
            caddy = start_process("caddy", argv, port=port, env=caddy_env, log=workdir / "caddy.log")
            started.append(caddy)
            wait_ready(caddy, path="/accounts/login/", timeout=30)
            topology = Topology(caddy=caddy, apps={s.name: s for s in started[:2]}, env=env, logdir=workdir)
            yield topology
        finally:
            # A restarted process replaced its killed self in topology.apps.
            for server in started if topology is None else [*topology.apps.values(), topology.caddy]:
                server.stop(15)


def set_production_password(user: Any, password: str) -> None:
    """Store ``password`` with production's hasher: the test settings' fast one is not among its hashers."""
    hasher = PBKDF2PasswordHasher()
    user.password = hasher.encode(password, hasher.salt())
    user.save(update_fields=["password"])
